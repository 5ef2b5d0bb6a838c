// billing.js — the billing page for every customer (the server filters by
// role: finance and admin see every account, the operator its own, a
// trader its team's nodes): spend, revenue, page-years bought and
// sold and offline credits per account or team and month
// (GET /v1/billing/summary), the invoices of a month range, one invoice
// with its lines, and its FOCUS-style CSV (GET /v1/invoices/{id}/export),
// downloaded with the token (a plain link could not send it).
//
// Money is integer nanodollars; each figure is shown to the cent with the
// exact amount in its tooltip. Usage arrives in page-seconds and is shown
// as page-years.

import uPlot from '../vendor/uPlot.esm.js';

import {all, api, el, fillRows, fitRows, mountSession, nameText, raw, roleProblem, say} from './api.js';
import {axisSize, uplotTip} from './charttip.js';
import * as fmt from './fmt.js';

const ROLES = ['trader', 'operator', 'finance', 'admin'];
const $ = id => document.getElementById(id);
const banner = $('banner');
let plot = null;
let current = null; // the invoice shown

function monthStr(y, m)
{
	return `${y}-${String(m).padStart(2, '0')}`;
}

function defaultRange()
{
	const now = new Date();
	const y = now.getUTCFullYear(), m = now.getUTCMonth() + 1;
	const from = new Date(Date.UTC(y, m - 1 - 5, 1));
	$('b-to').value = monthStr(y, m);
	$('b-from').value = monthStr(from.getUTCFullYear(), from.getUTCMonth() + 1);
}

function months(from, to)
{
	const out = [];
	let [y, m] = from.split('-').map(Number);
	const [ty, tm] = to.split('-').map(Number);
	while (y < ty || (y === ty && m <= tm)) {
		out.push(monthStr(y, m));
		if (++m > 12) {
			m = 1;
			y++;
		}
		if (out.length > 120)
			break;
	}
	return out;
}

function accountName(inv)
{
	const n = inv.account_name || (typeof inv.account === 'string' ? inv.account : '');
	return n ? `${n} (#${inv.account_id})` : `#${inv.account_id}`;
}

// Amounts to the cent, under a cent to two significant digits, or exactly
// to the nanodollar when "exact" is ticked (fmt.amount); the exact figure
// is always in the tooltip.
function exact()
{
	return $('b-exact').checked;
}

function moneyCell(ns)
{
	if (ns === undefined || ns === null)
		return el('td', {class: 'num muted'}, '—');
	return el('td', {class: 'num', title: `${fmt.amount(ns, true)} exactly`}, fmt.amount(ns, exact()));
}

// page-years from whichever the row carries: page-seconds or page-years
function pyCell(row, base)
{
	// null: nothing of that kind that month (a SQL sum over no rows)
	const ps = row[`${base}_page_seconds`] ?? row[`page_seconds_${base}`];
	if (ps !== undefined && ps !== null)
		return el('td', {class: 'num', title: `${ps} page-seconds`}, fmt.pageYears(ps));
	return el('td', {class: 'num muted'}, '—');
}

function rowMonth(r)
{
	if (r.month && typeof r.month === 'string')
		return r.month.slice(0, 7);
	if (r.year && r.month)
		return monthStr(r.year, r.month);
	return r.period || '';
}

function rowKey(r, by)
{
	if (by === 'team')
		return r.team_name || r.team || (r.team_id ? `team #${r.team_id}` : 'no team');
	const n = r.account_name || r.account;
	return n ? `${n} (#${r.account_id})` : r.account_id ? `#${r.account_id}` : '';
}

function drawChart(rows, ms)
{
	const spend = ms.map(() => 0), revenue = ms.map(() => 0);
	// the exact sums, in nanodollars, for the tooltip
	const exactSpend = ms.map(() => 0n), exactRevenue = ms.map(() => 0n);
	for (const r of rows) {
		const i = ms.indexOf(rowMonth(r));
		if (i < 0)
			continue;
		// dollars as floats only to place points on the chart
		spend[i] += Number(r.spend || 0) / 1e9;
		revenue[i] += Number(r.revenue || 0) / 1e9;
		exactSpend[i] += fmt.big(r.spend ?? 0);
		exactRevenue[i] += fmt.big(r.revenue ?? 0);
	}
	const data = [ms.map((_, i) => i), revenue, spend]; // spend drawn last, on top
	const box = $('chart');
	if (plot)
		plot.destroy();
	// the month's exact spend and revenue, read as the table reads them
	// (fmt.amount: cents, under a cent two significant digits) with the
	// exact amount to the nanodollar beside each
	const figure = ns => (exact() ? fmt.amount(ns, true) : `${fmt.amount(ns)} (exactly ${fmt.amount(ns, true)})`);
	const tip = (u, i) => [ms[i], {text: `revenue ${figure(exactRevenue[i])}`, cls: 'buyside'},
	                       {text: `spend ${figure(exactSpend[i])}`, cls: 'sellside'}];
	plot = new uPlot({
		width: Math.max(300, box.clientWidth),
		height: 240,
		scales: {x: {time: false}},
		// the legend names the series; exact values are in the tooltip
		// and the summary table (a live legend read "month: _ spend: _"
		// off the chart)
		legend: {live: false},
		plugins: [uplotTip(tip)],
		axes: [
			{values: (u, vals) => vals.map(v => (Number.isInteger(v) && ms[v]) || '')},
			// ticks with the decimals they need: a small month is not "$0.00" five times
			{size: axisSize, values: (u, vals) => vals.map(v => fmt.price(Math.round(v * 1e9)))}
		],
		series: [
			{label: 'month'},
			{label: 'revenue', stroke: '#0a7d32', width: 2},
			// dashed and on top: equal spend and revenue (one account pays
			// another) do not hide one line under the other
			{label: 'spend', stroke: '#b42318', width: 2, dash: [6, 4]}
		]
	}, data, box);
}

// Each cell of the summary named by its column's heading (data-label):
// in a narrow box the rows are cards of "heading  figure" lines
// (app.css), where no column hides behind a sideways scroll.
function labelCells(table)
{
	const heads = [...table.tHead.rows[0].cells].map(th => [...th.childNodes].map(n => (n.nodeName === 'BR' ? ' ' : n.textContent)).join(''));
	for (const tr of [...table.tBodies[0].rows, ...table.tFoot.rows])
		[...tr.cells].forEach((c, i) => {
			if (c.colSpan === 1 && heads[i])
				c.dataset.label = heads[i];
		});
}

// The summary as a table when its columns fit its box, as cards when they
// do not (app.css, #summary-panel.cards): measured, since the width it
// needs grows with the names and the figures (exact amounts, millions).
function fitSummary()
{
	const panel = $('summary-panel'), box = $('summary').closest('.scroll');
	panel.classList.remove('cards');
	if (box.offsetParent && box.scrollWidth > box.clientWidth + 1)
		panel.classList.add('cards');
	fitRows(box);
}

async function loadSummary(from, to, by)
{
	$('summary-key').textContent = by;
	try {
		const res = await api(`/v1/billing/summary?from=${from}&to=${to}&by=${by}`);
		const rows = res.items || res.rows || [];
		const sum = {spend: 0n, revenue: 0n, credits: 0n};
		const trs = rows.map(r => {
			sum.spend += fmt.big(r.spend ?? 0);
			sum.revenue += fmt.big(r.revenue ?? 0);
			sum.credits += fmt.big(r.offline_credits ?? 0);
			return el('tr', {}, el('td', {}, rowMonth(r)), el('td', {}, nameText(rowKey(r, by))),
			          moneyCell(r.spend), moneyCell(r.revenue),
			          pyCell(r, 'bought'), pyCell(r, 'sold'), moneyCell(r.offline_credits));
		});
		fillRows($('summary').tBodies[0], trs, 7, 'no billed usage in these months');
		$('summary').tFoot.replaceChildren(el('tr', {}, el('th', {}, 'total'), el('th', {}),
		                                         moneyCell(sum.spend), moneyCell(sum.revenue),
		                                         el('td', {}), el('td', {}), moneyCell(sum.credits)));
		labelCells($('summary'));
		fitSummary();
		drawChart(rows, months(from, to));
	} catch (e) {
		// nothing of the range shown before stays: not its total, not
		// its chart, beside "no summary"
		fillRows($('summary').tBodies[0], [], 7, 'no summary');
		$('summary').tFoot.replaceChildren();
		fitSummary();
		drawChart([], months(from, to));
		say(banner, `could not load the billing summary: ${e.message}`);
	}
}

async function loadInvoices(from, to, status)
{
	const ms = months(from, to);
	try {
		// the API filters by one year and month; a range asks month by month
		const lists = await Promise.all(ms.map(m => {
			const [y, mo] = m.split('-').map(Number);
			const q = `year=${y}&month=${mo}${status ? `&status=${status}` : ''}`;
			return all(`/v1/invoices?${q}`, 500);
		}));
		const invs = lists.flat().sort((a, b) => b.id - a.id);
		const trs = invs.map(inv => {
			const open = el('button', {type: 'button', 'aria-label': `Open invoice ${inv.id}`}, 'Open');
			open.addEventListener('click', () => openInvoice(inv.id));
			return el('tr', {'data-invoice': inv.id, class: current === inv.id ? 'selected' : null},
			          el('td', {}, inv.id),
			          el('td', {}, nameText(accountName(inv))),
			          el('td', {}, monthStr(inv.year, inv.month)),
			          el('td', {}, inv.status),
			          el('td', {class: 'num'}, typeof inv.lines === 'number' ? inv.lines : ''),
			          moneyCell(inv.total), el('td', {}, open));
		});
		fillRows($('invoices').tBodies[0], trs, 7, 'no invoices in these months');
	} catch (e) {
		fillRows($('invoices').tBodies[0], [], 7, 'no invoices');
		say(banner, `could not list the invoices: ${e.message}`);
	}
}

// Columns for an invoice line, in a finance team's order; any field the
// exchange adds later is shown after them. Hidden: ids a person does not
// read and the duplicates of shown fields (ns times, page_years text,
// amount_usd text).
const LINE_COLS = [
	['contract_id', 'contract', v => v],
	['market', 'market', v => v],
	['delivery', 'delivery', v => v],
	['kind', 'kind', v => v],
	['role', 'role', v => v],
	['usage_month', 'usage month', v => v],
	// short ("12-06 22:24:59"; the usage month has the year), the full
	// instant in the tooltip: the lines fit 1280 px with exact amounts
	['charge_start', 'from (UTC)', v => fmt.shortTime(v)],
	['charge_end', 'to (UTC)', v => fmt.shortTime(v)],
	['page_seconds', 'page-years', v => fmt.pageYears(v)],
	['unit_price', 'price / page-year', v => fmt.price(v)],
	['reports', 'reports', v => v],
	['amount', 'amount', v => fmt.amount(v, exact())],
	['recon', 'reconciled', v => v]
];
const HIDDEN = ['id', 'posting_id', 'movement_id', 'invoice_id', 'account_id', 'year', 'month',
                'charge_start_ns', 'charge_end_ns', 'page_years', 'amount_usd'];
const MONEY = new Set(['amount', 'fee', 'total']);

function lineColumns(lines)
{
	const keys = new Set();
	for (const l of lines)
		for (const k of Object.keys(l))
			keys.add(k);
	const cols = LINE_COLS.filter(([k]) => keys.has(k));
	const known = new Set(LINE_COLS.map(c => c[0]).concat(HIDDEN));
	for (const k of keys)
		if (!known.has(k))
			cols.push([k, k.replace(/_/g, ' '), v => (MONEY.has(k) ? fmt.amount(v, exact()) : typeof v === 'object' ? JSON.stringify(v) : v)]);
	return cols;
}

// One line per contract, role, kind and month: the exchange writes a line
// per usage report; a person reads a contract's month. The report lines
// stay a click away (the row's "reports" button).
function aggregate(lines)
{
	const groups = new Map();
	const out = [];
	for (const l of lines) {
		if (l.contract_id === undefined || l.contract_id === null) {
			out.push({line: l, detail: []});
			continue;
		}
		const key = [l.contract_id, l.role, l.kind, l.usage_month, l.unit_price].join('|');
		let g = groups.get(key);
		if (!g) {
			g = {line: Object.assign({}, l, {reports: 0, amount: 0n, page_seconds: 0n}), detail: []};
			groups.set(key, g);
			out.push(g);
		}
		const a = g.line;
		a.reports++;
		a.amount += fmt.big(l.amount ?? 0);
		a.page_seconds += fmt.big(l.page_seconds ?? 0);
		if (l.charge_start && (!a.charge_start || l.charge_start < a.charge_start))
			a.charge_start = l.charge_start;
		if (l.charge_end && (!a.charge_end || l.charge_end > a.charge_end))
			a.charge_end = l.charge_end;
		g.detail.push(l);
	}
	return out;
}

// The due date shown on an invoice: 30 days after its month ends (net 30,
// docs/billing-api.md); the exchange itself does not enforce it.
function dueDate(inv)
{
	const end = Date.UTC(inv.year, inv.month, 1); // the first of the next month
	return new Date(end + 29 * 86400000).toISOString().slice(0, 10);
}

let shown = null; // the open invoice's {inv, lines}, to redraw on "exact"

function drawInvoice()
{
	if (!shown)
		return;
	const {inv, lines} = shown;
	const groups = aggregate(lines);
	$('invoice-head').textContent =
	    `invoice ${inv.id} · account ${accountName(inv)} · ` +
	    `${monthStr(inv.year, inv.month)} · ${inv.status} · due ${dueDate(inv)} · total ${fmt.amount(inv.total, exact())}` +
	    (inv.total < 0 ? ' (paid to the account)' : '');
	$('invoice-head').title = `total ${fmt.amount(inv.total, true)} exactly`;
	const cols = lineColumns(groups.map(g => g.line));
	$('lines').tHead.rows[0].replaceChildren(...cols.map(([, h]) => el('th', {}, h)));
	const cell = (l, k, f) => {
		const v = l[k];
		const num = typeof v === 'number' || typeof v === 'bigint' || MONEY.has(k);
		const when = (k === 'charge_start' || k === 'charge_end') && v ? fmt.time(v) : null;
		return el('td', {class: num ? 'num' : null, title: MONEY.has(k) && v !== undefined ? `${fmt.amount(v, true)} exactly` : when},
		          v === undefined || v === null ? '' : f(v));
	};
	const trs = [];
	let sum = 0n;
	groups.forEach((g, gi) => {
		sum += fmt.big(g.line.amount ?? 0);
		const tr = el('tr', {'data-line': gi}, ...cols.map(([k, , f]) => {
			if (k !== 'reports' || g.detail.length < 2)
				return cell(g.line, k, f);
			const b = el('button', {type: 'button', 'aria-expanded': 'false', title: 'show the lines of each usage report'},
			             `${g.detail.length} ▸`);
			b.addEventListener('click', () => {
				const open = b.getAttribute('aria-expanded') !== 'true';
				b.setAttribute('aria-expanded', String(open));
				b.textContent = `${g.detail.length} ${open ? '▾' : '▸'}`;
				for (const d of $('lines').tBodies[0].querySelectorAll(`tr[data-detail="${gi}"]`))
					d.hidden = !open;
				fitRows($('lines').closest('.scroll'));
			});
			return el('td', {class: 'num'}, b, el('span', {class: 'print-only'}, String(g.detail.length)));
		}));
		trs.push(tr);
		for (const d of g.detail.length > 1 ? g.detail : [])
			trs.push(el('tr', {'data-detail': gi, class: 'detail', hidden: true},
			            ...cols.map(([k, , f]) => (k === 'reports' ? el('td', {class: 'num muted'}, '1') : cell(d, k, f)))));
	});
	fillRows($('lines').tBodies[0], trs, Math.max(1, cols.length), 'this invoice has no lines');
	// the lines add up to the total, visibly
	const ai = cols.findIndex(([k]) => k === 'amount');
	$('lines').tFoot.replaceChildren(ai < 0 ? el('tr') : el('tr', {},
	    el('th', {colspan: ai}, `total of ${groups.length} line${groups.length === 1 ? '' : 's'}`),
	    el('th', {class: 'num', title: `${fmt.amount(sum, true)} exactly`}, fmt.amount(sum, exact())),
	    ...cols.slice(ai + 1).map(() => el('th'))));
}

async function openInvoice(id)
{
	current = id;
	for (const tr of $('invoices').tBodies[0].rows)
		tr.classList.toggle('selected', tr.dataset.invoice === String(id));
	$('csv-status').textContent = '';
	try {
		// {invoice, lines} (as ramexctl reads it), or the invoice with
		// its lines inside
		const res = await api(`/v1/invoices/${id}`);
		const inv = res.invoice && typeof res.invoice === 'object' ? res.invoice : res;
		const lines = Array.isArray(res.lines) ? res.lines : Array.isArray(inv.items) ? inv.items : [];
		shown = {inv, lines};
		drawInvoice();
		$('csv').disabled = false;
		$('print').disabled = false;
		$('csv').focus();
	} catch (e) {
		$('csv').disabled = true;
		say(banner, `could not open invoice ${id}: ${e.message}`);
	}
}

async function downloadCsv()
{
	if (!current)
		return;
	const id = current;
	$('csv-status').textContent = 'downloading…';
	try {
		const res = await raw(`/v1/invoices/${id}/export?format=csv`, {headers: {Accept: 'text/csv'}});
		const text = await res.text();
		const rows = text.split('\n').filter(l => l.trim() !== '').length - 1;
		// the exchange names the file (invoice-ID-YYYY-MM.csv)
		const cd = /filename="([^"/\\]+)"/.exec(res.headers.get('Content-Disposition') || '');
		const name = cd ? cd[1] : `ramex-invoice-${id}.csv`;
		const url = URL.createObjectURL(new Blob([text], {type: 'text/csv'}));
		const a = el('a', {href: url, download: name, hidden: true});
		document.body.append(a);
		a.click();
		a.remove();
		setTimeout(() => URL.revokeObjectURL(url), 10000);
		$('csv-status').textContent = `${name}: ${Math.max(0, rows)} row${rows === 1 ? '' : 's'}`;
	} catch (e) {
		$('csv-status').textContent = '';
		say(banner, `could not export invoice ${id}: ${e.message}`);
	}
}

async function show()
{
	const from = $('b-from').value, to = $('b-to').value;
	if (!/^\d{4}-\d{2}$/.test(from) || !/^\d{4}-\d{2}$/.test(to)) {
		say(banner, 'choose the first and the last month to show');
		return;
	}
	if (from > to) {
		say(banner, 'the first month comes after the last; swap them');
		return;
	}
	say(banner, '');
	await Promise.all([loadSummary(from, to, $('b-by').value),
	                   loadInvoices(from, to, $('b-status').value)]);
}

async function start(principal)
{
	const why = roleProblem(principal, ROLES, 'read billing');
	$('b-show').disabled = !!why;
	if (why) {
		say(banner, why, principal ? 'error' : 'warn');
		$('b-scope').textContent = '';
		return;
	}
	// whose bill this is: the server shows each role its own
	const whose = principal.role === 'operator' ? `the invoices of ${principal.account_name || 'your account'}`
	              : principal.role === 'trader' ? `the invoices of team ${principal.team_name || principal.team_id}'s nodes`
	              : 'every account\'s invoices';
	$('b-scope').textContent = `You see ${whose}.`;
	await show();
}

$('range').addEventListener('submit', ev => {
	ev.preventDefault();
	show();
});
// the chart follows its box (a narrower window left it wider than the page)
new ResizeObserver(() => {
	if (plot && Math.abs(plot.width - Math.max(300, $('chart').clientWidth)) > 1)
		plot.setSize({width: Math.max(300, $('chart').clientWidth), height: 240});
}).observe($('chart'));
// a new width may fit the summary's columns, or no longer
let summaryWidth = 0;
new ResizeObserver(entries => {
	const w = Math.round(entries[0].contentRect.width);
	if (w !== summaryWidth) {
		summaryWidth = w;
		fitSummary();
	}
}).observe($('summary-panel'));
$('csv').addEventListener('click', downloadCsv);
$('print').addEventListener('click', () => window.print());
// one click between rounded and exact amounts, everywhere on the page
$('b-exact').addEventListener('change', () => {
	// exact figures are wider: the summary gets the whole width
	document.body.classList.toggle('exact', exact());
	drawInvoice();
	show();
});
defaultRange();
mountSession(start, ROLES);
