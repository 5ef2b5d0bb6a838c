// trade.js — the trading page: an order form that turns what a person types
// into exact integers (fmt.js) and shows the exchange's own reason when it
// refuses an order; the caller's open orders with cancel, its fills and its
// contracts, kept fresh by the event stream.

import {api, el, fillRows, mountSession, roleProblem, say} from './api.js';
import {openEvents} from './events.js';
import * as fmt from './fmt.js';

const ROLES = ['node', 'trader', 'operator'];
const $ = id => document.getElementById(id);
const banner = $('banner');
const form = $('order');

let me = null;
let markets = [];
let stream = null;
const fills = new Map(); // trade_id -> fill, newest first when shown
const seenAccounts = new Set();
const timers = {};

// Runs fn once per 200 ms burst of events.
function soon(name, fn)
{
	if (timers[name])
		return;
	timers[name] = setTimeout(() => {
		timers[name] = null;
		fn();
	}, 200);
}

function setLive(state, detail)
{
	const dot = $('live').querySelector('.status-dot');
	dot.className = `status-dot ${state === 'live' ? 'live' : state === 'down' ? 'down' : ''}`;
	$('live-text').textContent = state === 'live' ? 'live' : state === 'connecting' ? 'connecting…' : detail || 'not connected';
}

// ---- the form ----

function side()
{
	return form.querySelector('input[name="side"]:checked').value;
}

function fieldError(id, msg)
{
	$(`${id}-error`).textContent = msg || '';
	$(id).setAttribute('aria-invalid', msg ? 'true' : 'false');
}

// Reads the form into an order body, or returns null after marking each
// wrong field with its reason. `quiet`: only update the hints.
function readForm(quiet)
{
	const body = {market: $('o-market').value, side: side()};
	let ok = true;
	const mark = (id, msg) => {
		if (msg)
			ok = false;
		if (!quiet || !msg)
			fieldError(id, msg);
	};

	const acct = $('o-account').value.trim();
	if (acct === '') {
		if (me && me.role === 'trader')
			mark('o-account', 'a trader trades for a node of its team: enter that node\'s account id');
		else
			mark('o-account', '');
	} else if (!/^[1-9][0-9]*$/.test(acct)) {
		mark('o-account', 'an account id is a whole number such as 12');
	} else {
		body.account_id = Number(acct);
		mark('o-account', '');
	}

	const q = fmt.parseQuantity($('o-qty').value, $('o-unit').value);
	if (q.ok) {
		body.pages = Number(q.value);
		$('o-qty-hint').textContent = `= ${fmt.pagesAndBytes(q.value)}`;
		mark('o-qty', '');
	} else {
		$('o-qty-hint').textContent = '';
		mark('o-qty', q.error);
	}

	const p = fmt.parsePrice($('o-price').value);
	if (p.ok) {
		body.price = Number(p.value);
		let hint = `= ${fmt.groupDigits(p.value.toString())} n$/page-year · ${fmt.pricePerGiB(p.value)} per GiB-year`;
		if (q.ok)
			hint += ` · ${fmt.money(p.value * q.value)} per year for this order`;
		$('o-price-hint').textContent = hint;
		mark('o-price', '');
	} else {
		$('o-price-hint').textContent = '';
		mark('o-price', p.error);
	}

	body.tif = $('o-tif').value;
	if (body.tif === 'gtd') {
		const v = $('o-expires').value;
		const d = v ? new Date(v) : null;
		if (!d || Number.isNaN(d.getTime()))
			mark('o-expires', 'enter when a GTD order expires');
		else if (d.getTime() <= Date.now())
			mark('o-expires', 'the expiry must be in the future');
		else {
			body.expires_ns = d.getTime() * 1e6;
			mark('o-expires', '');
		}
	}
	if ($('o-post').checked)
		body.post_only = true;
	const coid = $('o-coid').value.trim();
	if (coid) {
		if (!/^[A-Za-z0-9._:-]{1,64}$/.test(coid))
			mark('o-coid', 'use up to 64 letters, digits and . _ : -');
		else {
			body.client_order_id = coid;
			mark('o-coid', '');
		}
	} else {
		mark('o-coid', '');
	}
	if (body.pages !== undefined && !Number.isSafeInteger(body.pages))
		mark('o-qty', 'that quantity is too large');
	return ok ? body : null;
}

function syncSide()
{
	const s = side();
	const b = $('o-submit');
	b.className = s;
	b.textContent = s === 'buy' ? 'Place buy order' : 'Place sell order';
}

// The chosen market's rules, so a person sees them before the exchange
// refuses an order for them.
function syncMarket()
{
	const m = markets.find(x => x.name === $('o-market').value);
	$('o-market-hint').textContent = m
	    ? `price ${fmt.price(m.price_min)} to ${fmt.price(m.price_max)} in steps of ${fmt.price(m.tick)}; ` +
	          `${fmt.pages(m.min_pages)} to ${fmt.pagesAndBytes(m.max_pages)} in lots of ${fmt.pages(m.lot)}`
	    : '';
}

function syncTif()
{
	$('o-expires-field').hidden = $('o-tif').value !== 'gtd';
}

function describePlaced(res)
{
	const o = res.order || {};
	const n = (res.trades || []).length;
	let s = `order ${o.id} ${o.side} ${fmt.pagesAndBytes(o.pages)} at ${fmt.price(o.price)}: `;
	if (n)
		s += `${n} fill${n === 1 ? '' : 's'}, `;
	if (o.status === 'open')
		s += `${fmt.pages(o.remaining)} pages resting in the book`;
	else if (o.status === 'filled')
		s += 'filled';
	else
		s += `${o.status}${o.reason ? ` (${o.reason})` : ''}`;
	return s;
}

form.addEventListener('submit', async ev => {
	ev.preventDefault();
	const result = $('o-result');
	say(result, '');
	const body = readForm(false);
	if (!body) {
		const bad = form.querySelector('[aria-invalid="true"]');
		if (bad)
			bad.focus();
		say(result, 'the order was not sent: fix the fields marked above');
		return;
	}
	const btn = $('o-submit');
	btn.disabled = true;
	try {
		const res = await api('/v1/orders', {
			method: 'POST',
			json: body,
			headers: {'Idempotency-Key': crypto.randomUUID()}
		});
		for (const t of res.trades || [])
			addFill(t);
		say(result, describePlaced(res), 'ok');
		drawFills();
		loadOrders();
		loadContracts();
	} catch (e) {
		say(result, `the exchange refused the order: ${e.message}`);
	} finally {
		btn.disabled = false;
	}
});
for (const id of ['o-qty', 'o-unit', 'o-price', 'o-tif', 'o-expires', 'o-account', 'o-coid'])
	$(id).addEventListener('input', () => readForm(true));
for (const r of form.querySelectorAll('input[name="side"]'))
	r.addEventListener('change', syncSide);
$('o-tif').addEventListener('change', syncTif);
$('o-market').addEventListener('change', syncMarket);

// ---- lists ----

function acctCell(id)
{
	return el('td', {}, id === undefined || id === null ? '' : `#${id}`);
}

// "131,072 (0.50 GiB)": pages, and what they are in bytes
function pagesCell(p)
{
	return el('td', {class: 'num'}, fmt.pages(p), el('span', {class: 'muted'}, ` (${fmt.bytes(p)})`));
}

function noteAccount(id)
{
	if (!id || seenAccounts.has(id))
		return;
	seenAccounts.add(id);
	$('o-accounts').append(el('option', {value: id}));
}

async function cancel(o, btn)
{
	btn.disabled = true;
	try {
		await api(`/v1/orders/${o.id}`, {method: 'DELETE', headers: {'Idempotency-Key': crypto.randomUUID()}});
		say(banner, `order ${o.id} cancelled`, 'ok');
	} catch (e) {
		say(banner, `could not cancel order ${o.id}: ${e.message}`);
		btn.disabled = false;
	}
	loadOrders();
}

async function loadOrders()
{
	try {
		const page = await api('/v1/orders?status=open&limit=200');
		const rows = (page.items || []).map(o => {
			noteAccount(o.account_id);
			const btn = el('button', {type: 'button', 'aria-label': `Cancel order ${o.id}`}, 'Cancel');
			btn.addEventListener('click', () => cancel(o, btn));
			return el('tr', {'data-order': o.id},
			          el('td', {}, o.id), el('td', {}, o.market), acctCell(o.account_id),
			          el('td', {class: o.side === 'buy' ? 'buyside' : 'sellside'}, o.side),
			          el('td', {class: 'num', title: `${o.price} n$/page-year`}, fmt.price(o.price)),
			          pagesCell(o.remaining),
			          el('td', {}, o.post_only ? `${o.tif}, post-only` : o.tif),
			          el('td', {}, fmt.time(o.created_ns)), el('td', {}, btn));
		});
		fillRows($('orders').tBodies[0], rows, 9, 'no open orders');
	} catch (e) {
		say(banner, `could not list your orders: ${e.message}`);
	}
}

function addFill(f)
{
	const prev = fills.get(f.trade_id) || {};
	fills.set(f.trade_id, Object.assign({}, prev, f));
}

function drawFills()
{
	const list = [...fills.values()].sort((a, b) => b.trade_id - a.trade_id);
	const rows = list.map(f => el('tr', {'data-trade': f.trade_id},
	                              el('td', {}, f.time ? fmt.time(f.time) : 'just now'),
	                              el('td', {}, f.trade_id), el('td', {}, f.market),
	                              acctCell(f.buyer_id), acctCell(f.seller_id),
	                              el('td', {class: 'num', title: `${f.price} n$/page-year`}, fmt.price(f.price)),
	                              pagesCell(f.pages),
	                              el('td', {class: 'num'}, fmt.money(fmt.big(f.price) * fmt.big(f.pages))),
	                              el('td', {class: 'num'}, f.contract_id || '')));
	fillRows($('fills').tBodies[0], rows, 9, 'no fills yet');
}

// The moves a contract's state allows (docs/billing-api.md); whether the
// caller is the party who may make one is the exchange's to say.
const MOVES = {
	pending_delivery: [['deliver', 'Deliver', 'confirm that the pages are delivered (seller)']],
	active: [['recall', 'Recall', 'take the pages back (seller): spot gives notice, perm is a breach'],
	         ['end', 'End', 'release the pages (buyer)']],
	recalling: [['end', 'End', 'release the pages now (buyer)']]
};

function moves(c)
{
	return (MOVES[c.state] || []).map(([move, label, what]) => {
		const b = el('button', {type: 'button', title: what, 'data-move': move,
		                        'aria-label': `${label} contract ${c.id}`}, label);
		b.addEventListener('click', () => move_(c, move, b));
		return b;
	});
}

async function move_(c, move, btn)
{
	if (move === 'recall' && c.market.startsWith('perm-') &&
	    !confirm(`Recalling perm contract ${c.id} early breaches it. Recall anyway?`))
		return;
	btn.disabled = true;
	try {
		const res = await api(`/v1/contracts/${c.id}/${move}`, {method: 'POST', json: {}});
		const k = (res && (res.contract || res)) || {};
		say(banner, `contract ${c.id}: ${(k.state || 'moved').replace('_', ' ')}`, 'ok');
	} catch (e) {
		say(banner, `contract ${c.id} could not ${move}: ${e.message}`);
		btn.disabled = false;
	}
	loadContracts();
}

async function loadContracts()
{
	try {
		const page = await api('/v1/contracts?limit=200');
		const items = page.items || [];
		// every contract is one trade: the fills list starts from them
		for (const c of items)
			addFill({trade_id: c.trade_id, contract_id: c.id, market: c.market, buyer_id: c.buyer_id,
			         seller_id: c.seller_id, price: c.price, pages: c.pages, time: c.created_at});
		drawFills();
		const rows = items.map(c => el('tr', {'data-contract': c.id},
		                               el('td', {}, c.id), el('td', {}, c.market), el('td', {}, c.delivery),
		                               el('td', {}, c.state.replace('_', ' ')),
		                               acctCell(c.buyer_id), acctCell(c.seller_id),
		                               pagesCell(c.pages),
		                               el('td', {class: 'num', title: `${c.price} n$/page-year`}, fmt.price(c.price)),
		                               el('td', {}, c.deliver_by ? fmt.time(c.deliver_by) : ''),
		                               el('td', {}, c.term_end ? fmt.time(c.term_end) : '—'),
		                               el('td', {}, ...moves(c))));
		fillRows($('contracts').tBodies[0], rows, 11, 'no contracts yet');
	} catch (e) {
		say(banner, `could not list your contracts: ${e.message}`);
	}
}

// ---- start ----

function stop()
{
	if (stream)
		stream.stop();
	stream = null;
	fills.clear();
	for (const t of ['orders', 'fills', 'contracts'])
		$(t).tBodies[0].replaceChildren();
}

async function start(principal)
{
	stop();
	me = principal;
	const why = roleProblem(principal, ROLES, 'trade');
	form.querySelector('#o-submit').disabled = !!why;
	if (why) {
		say(banner, why, principal ? 'error' : 'warn');
		setLive('down', 'not connected');
		return;
	}
	say(banner, '');
	const acct = $('o-account');
	if (me.role === 'trader') {
		acct.value = '';
		acct.required = true;
		$('o-account-hint').textContent = 'the node of your team this order is for (the accounts of your orders are suggested)';
	} else {
		acct.value = me.account_id || '';
		acct.required = false;
		$('o-account-hint').textContent = 'your own account; leave as it is';
	}
	try {
		markets = (await api('/v1/markets')).items || [];
		const sel = $('o-market');
		const keep = sel.value;
		sel.replaceChildren(...markets.map(m => el('option', {value: m.name}, m.name)));
		if (markets.some(m => m.name === keep))
			sel.value = keep;
		syncMarket();
		if (!markets.length)
			say(banner, 'there are no markets yet; an operator creates them', 'warn');
	} catch (e) {
		say(banner, `could not list the markets: ${e.message}`);
	}
	await Promise.all([loadOrders(), loadContracts()]);
	stream = openEvents(ev => {
		if (ev.event === 'fill' && ev.data && ev.data.trade_id) {
			addFill(ev.data);
			soon('fills', drawFills);
			soon('orders', loadOrders);
		} else if (ev.event === 'order') {
			soon('orders', loadOrders);
		} else if (ev.event === 'contract') {
			soon('contracts', loadContracts);
		} else if (ev.event === 'overflow') {
			soon('orders', loadOrders);
			soon('contracts', loadContracts);
		}
	}, setLive);
}

syncSide();
syncTif();
mountSession(start, ROLES);
