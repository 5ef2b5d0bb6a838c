// api.js — how the pages talk to ramexd: the person's bearer token (kept in
// sessionStorage, so it ends with the tab), fetch with that token, errors
// from RFC 9457 problem+json turned into one readable sentence, and the
// sign-in box in each page's header. No framework; the pages import this.

const TOKEN_KEY = 'ramex.token';

export function token()
{
	return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t)
{
	if (t)
		sessionStorage.setItem(TOKEN_KEY, t);
	else
		sessionStorage.removeItem(TOKEN_KEY);
}

// An answer that was not 2xx: status, the problem's fields, and a message
// a person can act on (the problem's detail, which ramexd always writes).
export class ApiError extends Error {
	constructor(status, problem, fallback)
	{
		const detail = problem && problem.detail;
		super(detail || fallback || `the exchange answered ${status}`);
		this.status = status;
		this.problem = problem || null;
	}
}

function headers(extra)
{
	const h = Object.assign({Accept: 'application/json'}, extra || {});
	const t = token();
	if (t)
		h.Authorization = `Bearer ${t}`;
	return h;
}

async function problemOf(res)
{
	const ct = res.headers.get('Content-Type') || '';
	if (ct.includes('json')) {
		try {
			return await res.json();
		} catch {
			return null;
		}
	}
	return null;
}

// fetch with the token; returns the Response when it is 2xx, else throws
// ApiError. For bodies that are not JSON (CSV exports).
export async function raw(path, opts = {})
{
	let res;
	try {
		res = await fetch(path, {
			method: opts.method || 'GET',
			headers: headers(opts.headers),
			body: opts.body,
			signal: opts.signal,
			cache: 'no-store'
		});
	} catch (e) {
		if (e.name === 'AbortError')
			throw e;
		throw new ApiError(0, null,
		                   'could not reach the exchange; check that ' +
		                       'ramexd is running and retry');
	}
	if (!res.ok) {
		const p = await problemOf(res);
		let fallback;
		if (res.status === 401)
			fallback = 'sign in with a valid API token';
		else if (res.status === 403)
			fallback = 'your token\'s role may not do this';
		throw new ApiError(res.status, p, fallback);
	}
	return res;
}

// GET/POST/DELETE returning parsed JSON. `body` is an object to send.
export async function api(path, opts = {})
{
	const o = Object.assign({}, opts);
	if (opts.json !== undefined) {
		o.body = JSON.stringify(opts.json);
		o.headers = Object.assign({'Content-Type': 'application/json'},
		                          opts.headers || {});
	}
	const res = await raw(path, o);
	const text = await res.text();
	return text ? JSON.parse(text) : null;
}

// Every item of a paged list (Page: {items, next}), at most `max`.
export async function all(path, max = 1000)
{
	const out = [];
	let before = null;
	while (out.length < max) {
		const sep = path.includes('?') ? '&' : '?';
		const page = await api(before ? `${path}${sep}before=${before}` : path);
		out.push(...(page.items || []));
		if (page.next === null || page.next === undefined)
			break;
		before = page.next;
	}
	return out;
}

// An element with text: el('td', {class: 'num'}, '1,024').
export function el(tag, attrs, ...children)
{
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {})) {
		if (v === undefined || v === null || v === false)
			continue;
		if (k.startsWith('on'))
			e.addEventListener(k.slice(2), v);
		else if (v === true)
			e.setAttribute(k, '');
		else
			e.setAttribute(k, String(v));
	}
	for (const c of children) {
		if (c === null || c === undefined)
			continue;
		e.append(c instanceof Node ? c : document.createTextNode(String(c)));
	}
	return e;
}

// Shows `msg` in a banner element (role=alert), or clears it.
export function say(banner, msg, kind = 'error')
{
	banner.className = `banner ${kind}`;
	banner.textContent = msg || '';
}

// A banner several sources write to, one line each. A failed load says so
// under its own key until that load next succeeds (an exchange that
// recovers clears what its outage caused, at the next refresh); what a
// person did and must read (a cancel refused, the role that cannot act)
// stays until the same key says something else. The banner takes the
// colour of its most serious line.
const SEVERITY = {ok: 0, warn: 1, error: 2};
export function notices(banner)
{
	const lines = new Map(); // key -> {msg, kind}, oldest first
	function draw()
	{
		let kind = 'ok';
		for (const l of lines.values())
			if (SEVERITY[l.kind] > SEVERITY[kind])
				kind = l.kind;
		banner.className = `banner ${kind}`;
		banner.replaceChildren(...[...lines.values()].map(l => el('div', {}, l.msg)));
	}
	return {
		// says msg under key (an empty msg clears it); a key said again
		// keeps its place, so a refresh failing every 5 s does not move
		set(key, msg, kind = 'error')
		{
			if (msg)
				lines.set(key, {msg, kind});
			else
				lines.delete(key);
			draw();
		},
		clear(key)
		{
			if (lines.delete(key))
				draw();
		},
		has(key)
		{
			return lines.has(key);
		},
		reset()
		{
			lines.clear();
			draw();
		},
	};
}

// A name for a table cell. Names may be 63 characters without a space
// or hyphen (a team, an account): one that long wraps inside a column of
// its own width (.long-name) instead of pushing a table's figures out of
// its box; a short one stays on one line, as it was.
export function nameText(name)
{
	const s = name === null || name === undefined ? '' : String(name);
	return s.length > 20 ? el('span', {class: 'long-name'}, s) : s;
}

// Fills a <tbody> with rows, or one row saying `empty`.
export function fillRows(tbody, rows, cols, empty)
{
	tbody.replaceChildren();
	if (!rows.length)
		tbody.append(el('tr', {}, el('td', {colspan: cols, class: 'muted'},
		                                 empty)));
	else
		for (const r of rows)
			tbody.append(r);
	const box = tbody.closest('.scroll');
	if (box)
		fitRows(box);
}

// A scrolling list (.scroll, at most its CSS max-height) ends at the bottom
// of a row, not through one: a row cut in half at the box's edge reads as
// a clipped page, and whether there is more is what the scroll bar says.
// Rows differ in height (a long note wraps), so the height is measured.
export function fitRows(box)
{
	const table = box.querySelector('table');
	if (watched && table && !table.dataset.fitted) {
		table.dataset.fitted = 'yes';
		watched.observe(table);
	}
	box.style.maxHeight = '';
	if (!box.offsetParent || box.scrollHeight <= box.clientHeight)
		return; // hidden, or everything fits
	const limit = box.clientHeight;
	const top = box.getBoundingClientRect().top - box.scrollTop;
	let fit = 0;
	for (const r of box.querySelectorAll('tbody tr')) {
		if (r.hidden)
			continue;
		const bottom = r.getBoundingClientRect().bottom - top;
		if (bottom > limit + 0.5)
			break;
		fit = bottom;
	}
	// the horizontal scroll bar, if any, sits inside the max-height
	if (fit > 0)
		box.style.maxHeight = `${Math.ceil(fit) + (box.offsetHeight - box.clientHeight)}px`;
}

// A table that changes size (the page's columns settle, the window is
// resized, a row wraps) fits its box again.
const watched = typeof ResizeObserver === 'undefined' ? null : new ResizeObserver(entries => {
	for (const e of entries) {
		const box = e.target.closest('.scroll');
		if (box)
			fitRows(box);
	}
});

// The sign-in box in the header (#session). onChange(principal or null)
// runs once at start and after each sign in or out; roles (optional) are
// those the page can use, named in the hint when another role signs in.
export function mountSession(onChange, roles)
{
	const box = document.getElementById('session');
	let principal = null;

	function render()
	{
		box.replaceChildren();
		if (principal) {
			const out = el('button', {type: 'button', id: 'signout'},
			               'Sign out');
			out.addEventListener('click', () => {
				setToken('');
				principal = null;
				render();
				onChange(null);
			});
			// who, by name: the token's name and role, and the team or
			// account it acts for (ids on hover)
			const of = principal.team_name ? `, team ${principal.team_name}`
			           : principal.account_name ? `, ${principal.account_name}` : '';
			box.append(el('span', {id: 'whoami', title: `${principal.scope || ''} account ${principal.account_id || '-'} team ${principal.team_id || '-'}`},
			              'Signed in as ', el('strong', {}, principal.name), ` (${principal.role}${of})`),
			           out);
			return;
		}
		const input = el('input', {
			id: 'token',
			type: 'password',
			name: 'token',
			autocomplete: 'off',
			placeholder: 'rx_…',
			required: true,
			'aria-describedby': 'token-error'
		});
		const form = el('form', {id: 'signin', class: 'inline'},
		                el('label', {for: 'token'}, 'API token'),
		                input,
		                el('button', {type: 'submit', class: 'primary'}, 'Sign in'),
		                el('span', {id: 'token-error', class: 'error', role: 'alert'}));
		form.addEventListener('submit', async ev => {
			ev.preventDefault();
			const t = input.value.trim();
			const err = form.querySelector('#token-error');
			if (!/^rx_[0-9a-f]{64}$/.test(t)) {
				err.textContent = 'a token is rx_ followed by 64 hex digits';
				input.focus();
				return;
			}
			setToken(t);
			try {
				principal = await api('/v1/whoami');
			} catch (e) {
				setToken('');
				err.textContent = e.status === 401
				                      ? 'this token is not known or was revoked'
				                      : e.message;
				input.focus();
				return;
			}
			render();
			onChange(principal);
		});
		box.append(form);
	}

	(async () => {
		if (token()) {
			try {
				principal = await api('/v1/whoami');
			} catch {
				setToken('');
				principal = null;
			}
		}
		render();
		onChange(principal);
	})();
	return {
		get principal() { return principal; },
		roles
	};
}

// Whether principal's role is one of `roles`, with a sentence if not.
export function roleProblem(principal, roles, what)
{
	if (!principal)
		return `sign in with an API token to ${what}`;
	if (!roles.includes(principal.role))
		return `a ${principal.role} token may not ${what}; use a ` +
		       `${roles.join(' or ')} token`;
	return '';
}
