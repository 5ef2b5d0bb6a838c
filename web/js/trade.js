// trade.js — the trading page: an order form that turns what a person types
// into exact integers (fmt.js) and shows the exchange's own reason when it
// refuses an order; the team's nodes with their automation (pause, resume);
// the caller's open orders with who placed each and cancel (confirmed, with
// a reason, when someone else placed it), the order history with who
// cancelled what and why, its fills and its contracts, kept fresh by the
// event stream. Accounts are shown by name, their id on hover.

import {api, el, fillRows, mountSession, nameText, notices, roleProblem, say} from './api.js';
import {openEvents} from './events.js';
import * as fmt from './fmt.js';

const ROLES = ['node', 'trader', 'operator', 'admin'];
const TRADING = ['node', 'trader', 'operator']; // may place orders
const PAUSING = ['trader', 'admin'];            // may pause a node's agent
const $ = id => document.getElementById(id);
const banner = notices($('banner'));
const form = $('order');

let me = null;
let markets = [];
let stream = null;
const fills = new Map(); // trade_id -> fill, newest first when shown
const names = new Map(); // account id -> name
const timers = {};

// Runs fn once per 200 ms burst of events.
function soon(name, fn)
{
	if (timers[name])
		return;
	timers[name] = setTimeout(() => {
		timers[name] = null;
		if (me) // not after signing out
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

	const acct = $('o-account').value;
	if (acct === '') {
		if (me && me.role === 'trader')
			mark('o-account', 'a trader trades for a node of its team: pick one (your team has none yet?)');
		else
			mark('o-account', '');
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
			hint += ` · ${fmt.amount(p.value * q.value)} per year for this order`;
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
	// the market's own limits, before the exchange refuses them
	const rules = fmt.marketCheck(markets.find(x => x.name === body.market),
	                              q.ok ? q.value : null, p.ok ? p.value : null);
	if (rules.pages)
		mark('o-qty', rules.pages);
	if (rules.price)
		mark('o-price', rules.price);
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
	    ? `price ${Number(m.price_min) > 0 ? `${fmt.price(m.price_min)} to ` : 'up to '}${fmt.price(m.price_max)} in steps of ${fmt.price(m.tick)}; ` +
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

function noteName(id, name)
{
	if (id && name)
		names.set(Number(id), name);
}

// An account by name, its id on hover (or "#id" when the name is not known
// here: a counterparty of another team)
function acctCell(id, name)
{
	if (id === undefined || id === null)
		return el('td', {}, '');
	noteName(id, name);
	const n = names.get(Number(id));
	return el('td', {title: `account ${id}`}, n ? nameText(n) : `#${id}`);
}

// Who placed or cancelled an order: "you", "agent of NODE" or a person
function whoCell(scope, name, byAgent)
{
	if (!scope)
		return el('td', {class: 'muted'}, '—');
	if (me && scope === me.scope)
		return el('td', {title: scope}, 'you');
	// "agent of NODE" or "PERSON (role)": the name does not break at its
	// hyphens; the words around it may wrap
	const n = name || scope;
	const m = /^(agent of )(.+)$/.exec(n) || /^()(.+?)( \([a-z]+\))$/.exec(n) || ['', '', n, ''];
	return el('td', {title: scope, class: byAgent ? 'who agent' : 'who'}, m[1], el('span', {class: 'name'}, m[2]), m[3] || '');
}

// a time in a list: short, the full instant on hover
function timeCell(t)
{
	return el('td', {title: fmt.time(t)}, fmt.shortTime(t));
}

// "131,072 (0.50 GiB)": pages, and what they are in bytes
function pagesCell(p)
{
	return el('td', {class: 'num'}, fmt.pages(p), el('span', {class: 'muted'}, ` (${fmt.bytes(p)})`));
}

// Cancelling an order someone else placed (the node's agent, another
// person) asks first, and for why: the note stays with the order.
async function cancel(o, btn)
{
	let json;
	if (me && o.placed_by && o.placed_by !== me.scope) {
		const who = o.placed_by_name || o.placed_by;
		const why = prompt(`Order ${o.id} was placed by ${who}, not by you. ` +
		                   'Cancel it anyway? Say why (kept with the order):',
		                   o.by_agent ? 'trading this node by hand' : '');
		if (why === null)
			return;
		json = {note: why.trim().slice(0, 200) || `cancelled by ${me.name}`};
	}
	btn.disabled = true;
	try {
		await api(`/v1/orders/${o.id}`, {method: 'DELETE', json, headers: {'Idempotency-Key': crypto.randomUUID()}});
		banner.set('action', `order ${o.id} cancelled`, 'ok');
	} catch (e) {
		banner.set('action', `could not cancel order ${o.id}: ${e.message}`);
		btn.disabled = false;
	}
	loadOrders();
	loadHistory();
}

async function loadOrders()
{
	try {
		const page = await api('/v1/orders?status=open&limit=200');
		banner.clear('orders'); // answered: an earlier failure is over
		const may = me && TRADING.includes(me.role);
		const rows = (page.items || []).map(o => {
			const btn = el('button', {type: 'button', 'aria-label': `Cancel order ${o.id}`}, 'Cancel');
			btn.disabled = !may;
			btn.addEventListener('click', () => cancel(o, btn));
			return el('tr', {'data-order': o.id, 'data-by': o.by_agent ? 'agent' : 'person'},
			          el('td', {}, o.id), el('td', {}, o.market), acctCell(o.account_id, o.account_name),
			          el('td', {class: o.side === 'buy' ? 'buyside' : 'sellside'}, o.side),
			          el('td', {class: 'num', title: `${fmt.groupDigits(String(o.price))} n$/page-year`}, fmt.price(o.price)),
			          pagesCell(o.remaining),
			          el('td', {}, o.post_only ? `${o.tif}, post-only` : o.tif),
			          whoCell(o.placed_by, o.placed_by_name, o.by_agent),
			          timeCell(o.created_ns), el('td', {}, btn));
		});
		fillRows($('orders').tBodies[0], rows, 10, 'no open orders');
	} catch (e) {
		banner.set('orders', `could not list your orders: ${e.message}`);
	}
}

// Why an order left the book: who cancelled it and their note, or the
// market's rule (the rest of an IOC, a FOK, post-only, self-trade, expiry)
const RULES = {
	ioc_remainder: 'the rest of an IOC order', fok_not_fillable: 'FOK: could not fill in full',
	post_only_would_take: 'post-only: would have traded', self_trade: 'self-trade prevention', gtd: 'expired (GTD)'
};

// A person's note in quotes, isolated in a <bdi>: a right-to-left note
// (Hebrew, Arabic) otherwise pulled the quotes and the words around it
// into its own direction ("paused by you: ”...“" with the quote at the
// line's far end)
function quoted(note)
{
	return note ? [': “', el('bdi', {}, note), '”'] : [];
}

function whyCell(o)
{
	if (o.status === 'filled')
		return el('td', {class: 'muted'}, '—');
	if (o.cancelled_by) {
		const who = me && o.cancelled_by === me.scope ? 'you' : o.cancelled_by_name || o.cancelled_by;
		const note = o.cancel_note ? `: “${o.cancel_note}”` : '';
		return el('td', {class: 'why', title: `${o.cancelled_by}${note}`}, `by ${who}`, ...quoted(o.cancel_note));
	}
	const r = RULES[o.reason] || o.reason || '';
	return el('td', {class: 'why', title: r}, r);
}

// Orders someone else cancelled, from the event stream: one is worth a
// word above the page when the one who cancelled it is not the one who
// placed it (a person cancelling an agent's quote, an agent or a person
// cancelling a person's order), not when an agent re-quotes its own.
const toName = new Set();

function sayCancels(done)
{
	for (const o of done) {
		if (!toName.delete(Number(o.id)) || !o.cancelled_by || o.cancelled_by === o.placed_by)
			continue;
		const who = s => (me && s === me.scope ? 'you' : null);
		const placer = who(o.placed_by) || o.placed_by_name || o.placed_by;
		const by = o.cancelled_by_name || o.cancelled_by;
		banner.set('action', `order ${o.id}, placed by ${placer}, was cancelled by ${by}` +
		            `${o.cancel_note ? `: “${o.cancel_note}”` : ''}`, 'warn');
	}
	if (toName.size > 200) // ids the history no longer reaches
		toName.clear();
}

async function loadHistory()
{
	try {
		const page = await api('/v1/orders?limit=100');
		banner.clear('history');
		const done = (page.items || []).filter(o => o.status !== 'open').slice(0, 50);
		const rows = done.map(o => el('tr', {'data-order': o.id, 'data-status': o.status},
		                              el('td', {}, o.id), el('td', {}, o.market), acctCell(o.account_id, o.account_name),
		                              el('td', {class: o.side === 'buy' ? 'buyside' : 'sellside'}, o.side),
		                              el('td', {class: 'num', title: `${fmt.groupDigits(String(o.price))} n$/page-year`}, fmt.price(o.price)),
		                              el('td', {class: 'num', title: `${fmt.groupDigits(String(o.filled))} of ${fmt.groupDigits(String(o.pages))} pages`},
		                                 `${fmt.pages(o.filled)} / ${fmt.pages(o.pages)}`),
		                              el('td', {}, o.status), whyCell(o),
		                              whoCell(o.placed_by, o.placed_by_name, o.by_agent),
		                              timeCell(o.updated_ns)));
		fillRows($('history').tBodies[0], rows, 10, 'no filled, cancelled or expired orders yet');
		sayCancels(done);
	} catch (e) {
		banner.set('history', `could not list your order history: ${e.message}`);
	}
}

// ---- nodes: names, the account picker, pause and resume ----

async function setPaused(n, pause, btn)
{
	let json;
	if (pause) {
		const why = prompt(`Pause ${n.name}'s agent? It keeps delivering and metering, withdraws its own ` +
		                   'quotes and places none until resumed. Why (optional):', 'trading by hand');
		if (why === null)
			return;
		json = why.trim() ? {note: why.trim().slice(0, 200)} : {};
	}
	btn.disabled = true;
	try {
		await api(`/v1/nodes/${n.id}/${pause ? 'pause' : 'resume'}`, {method: 'POST', json: json || {}});
		banner.set('action', `${n.name}: automation ${pause ? 'paused' : 'resumed'}`, 'ok');
	} catch (e) {
		banner.set('action', `could not ${pause ? 'pause' : 'resume'} ${n.name}: ${e.message}`);
	}
	loadNodes();
}

function automationCell(n)
{
	if (!n.trading_paused)
		return el('td', {class: 'buyside'}, 'running');
	const who = n.trading_paused_by === (me && me.scope) ? 'you' : n.trading_paused_by_name || 'a person';
	const note = n.trading_pause_note ? `: “${n.trading_pause_note}”` : '';
	return el('td', {class: 'sellside why', title: `since ${n.trading_paused_at}${note}`}, `paused by ${who}`,
	          ...quoted(n.trading_pause_note));
}

async function loadNodes()
{
	let nodes = [];
	try {
		nodes = (await api('/v1/nodes')).items || [];
	} catch (e) {
		// the list and the account picker stay as they were: a refresh
		// that failed (a 503) emptied them, and the form then asked
		// whether the team had no nodes
		banner.set('nodes', `could not list the nodes: ${e.message}`);
		return;
	}
	banner.clear('nodes');
	const may = me && PAUSING.includes(me.role);
	for (const n of nodes)
		noteName(n.id, n.name);
	const rows = nodes.map(n => {
		const b = el('button', {type: 'button', 'data-node': n.id, 'aria-label': `${n.trading_paused ? 'Resume' : 'Pause'} ${n.name}`},
		             n.trading_paused ? 'Resume' : 'Pause');
		b.addEventListener('click', () => setPaused(n, !n.trading_paused, b));
		return el('tr', {'data-node': n.id, 'data-paused': n.trading_paused ? 'yes' : 'no'},
		          el('td', {title: `account ${n.id}`}, nameText(n.name)), el('td', {title: `team ${n.team_id}`}, nameText(n.team_name)),
		          automationCell(n), el('td', {}, may ? b : ''));
	});
	fillRows($('nodes').tBodies[0], rows, 4, me && me.role === 'operator' ? 'no nodes' : 'no nodes in your team');
	// the order form's account picker: the team's nodes for a trader,
	// one's own account otherwise
	const sel = $('o-account');
	const keep = sel.value;
	if (me && me.role === 'trader') {
		sel.replaceChildren(...nodes.map(n => el('option', {value: n.id},
		                                          `${n.name}${n.trading_paused ? ' (paused)' : ''}`)));
		if (nodes.some(n => String(n.id) === keep))
			sel.value = keep;
	} else if (me && me.account_id) {
		noteName(me.account_id, me.account_name);
		sel.replaceChildren(el('option', {value: me.account_id}, me.account_name || `account ${me.account_id}`));
	} else {
		sel.replaceChildren();
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
	                              f.time ? timeCell(f.time) : el('td', {}, 'just now'),
	                              el('td', {}, f.trade_id), el('td', {}, f.market),
	                              acctCell(f.buyer_id, f.buyer_name), acctCell(f.seller_id, f.seller_name),
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
	if (me && !TRADING.includes(me.role))
		return [];
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
		banner.set('action', `contract ${c.id}: ${(k.state || 'moved').replace('_', ' ')}`, 'ok');
	} catch (e) {
		banner.set('action', `contract ${c.id} could not ${move}: ${e.message}`);
		btn.disabled = false;
	}
	loadContracts();
}

async function loadContracts()
{
	try {
		const page = await api('/v1/contracts?limit=200');
		banner.clear('contracts');
		const items = page.items || [];
		// every contract is one trade: the fills list starts from them
		for (const c of items)
			addFill({trade_id: c.trade_id, contract_id: c.id, market: c.market, buyer_id: c.buyer_id,
			         seller_id: c.seller_id, buyer_name: c.buyer_name, seller_name: c.seller_name,
			         price: c.price, pages: c.pages, time: c.created_at});
		drawFills();
		const rows = items.map(c => el('tr', {'data-contract': c.id},
		                               el('td', {}, c.id), el('td', {}, c.market), el('td', {}, c.delivery),
		                               // "pending delivery" on two lines: room for the actions at 1280 px
		                               el('td', {class: 'wrap'}, c.state.replace('_', ' ')),
		                               acctCell(c.buyer_id, c.buyer_name), acctCell(c.seller_id, c.seller_name),
		                               pagesCell(c.pages),
		                               el('td', {class: 'num', title: `${c.price} n$/page-year`}, fmt.price(c.price)),
		                               c.deliver_by ? timeCell(c.deliver_by) : el('td', {}, ''),
		                               // a term ends at a year's turn: the year, not "01-01 00:00:00"
		                               c.term_end ? el('td', {title: fmt.time(c.term_end)}, fmt.time(c.term_end).slice(0, 10)) : el('td', {}, '—'),
		                               el('td', {}, ...moves(c))));
		fillRows($('contracts').tBodies[0], rows, 11, 'no contracts yet');
	} catch (e) {
		banner.set('contracts', `could not list your contracts: ${e.message}`);
	}
}

// ---- start ----

function stop()
{
	if (stream)
		stream.stop();
	stream = null;
	banner.reset();
	fills.clear();
	for (const t of ['nodes', 'orders', 'history', 'fills', 'contracts'])
		$(t).tBodies[0].replaceChildren();
}

let generation = 0; // a sign out or in ends what an earlier start was doing

async function start(principal)
{
	stop();
	const gen = ++generation;
	me = principal;
	const why = roleProblem(principal, ROLES, 'trade');
	const readOnly = principal && !TRADING.includes(principal.role);
	form.querySelector('#o-submit').disabled = !!why || readOnly;
	form.closest('section').hidden = !!readOnly; // the admin reads
	if (why) {
		banner.set('role', why, principal ? 'error' : 'warn');
		setLive('down', 'not connected');
		return;
	}
	banner.set('role', readOnly ? `an ${me.role} reads this page; orders are placed by traders, nodes and the operator` : '',
	           'warn');
	$('o-account-hint').textContent = me.role === 'trader'
	                                      ? 'a node of your team (its id on hover in the lists)'
	                                      : 'your own account';
	$('h-nodes').hidden = $('nodes-hint').hidden = $('nodes').parentElement.hidden = me.role === 'operator';
	try {
		markets = (await api('/v1/markets')).items || [];
		banner.clear('markets');
		const sel = $('o-market');
		const keep = sel.value;
		sel.replaceChildren(...markets.map(m => el('option', {value: m.name}, m.name)));
		if (markets.some(m => m.name === keep))
			sel.value = keep;
		if (markets.some(m => m.name === wanted.get('market')))
			sel.value = wanted.get('market');
		syncMarket();
		readForm(true);
		if (!markets.length)
			banner.set('markets', 'there are no markets yet; an operator creates them', 'warn');
	} catch (e) {
		banner.set('markets', `could not list the markets: ${e.message}`);
	}
	if (gen !== generation)
		return;
	await loadNodes();
	if (gen !== generation)
		return;
	await Promise.all([loadOrders(), loadHistory(), loadContracts()]);
	if (gen !== generation)
		return;
	stream = openEvents(ev => {
		if (ev.event === 'fill' && ev.data && ev.data.trade_id) {
			addFill(ev.data);
			soon('fills', drawFills);
			soon('orders', loadOrders);
		} else if (ev.event === 'order') {
			soon('orders', loadOrders);
			soon('history', loadHistory);
			const d = ev.data || {};
			// cancelled by someone else: the history, read next, tells
			// whether it was someone else than who placed it, and names them
			if (d.status === 'cancelled' && d.cancelled_by && d.cancelled_by !== me.scope)
				toName.add(Number(d.id));
		} else if (ev.event === 'automation') {
			soon('nodes', loadNodes);
		} else if (ev.event === 'contract') {
			soon('contracts', loadContracts);
		} else if (ev.event === 'overflow') {
			soon('orders', loadOrders);
			soon('history', loadHistory);
			soon('nodes', loadNodes);
			soon('contracts', loadContracts);
		}
	}, setLive);
}

// Orders placed elsewhere (a node's agent, another person) send no event
// until they change: the lists are read again every POLL_MS as well.
const POLL_MS = 5000;
setInterval(() => {
	if (!me || !stream)
		return;
	soon('orders', loadOrders);
	soon('history', loadHistory);
	soon('nodes', loadNodes);
	if (banner.has('contracts')) // sent no event since it failed: try again
		soon('contracts', loadContracts);
}, POLL_MS);

// From a book level on the Market page: ?market=M&side=buy|sell&price=$
// fills the form (the market once the markets are listed)
const wanted = new URLSearchParams(location.search);
if (['buy', 'sell'].includes(wanted.get('side')))
	$(wanted.get('side') === 'buy' ? 'o-buy' : 'o-sell').checked = true;
if (wanted.get('price'))
	$('o-price').value = wanted.get('price');

syncSide();
syncTif();
mountSession(start, ROLES);
