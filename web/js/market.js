// market.js — the market view: depth (uPlot), the book, last trades and
// candles (lightweight-charts) of one market, refreshed when the event
// stream reports a fill or an order change, and every 15 s besides (the
// stream only carries the events of the caller's own accounts or team, so
// other people's trades show up through the poll).

import {createChart, CandlestickSeries, HistogramSeries} from '../vendor/lightweight-charts.mjs';
import uPlot from '../vendor/uPlot.esm.js';

import {api, el, fillRows, mountSession, roleProblem, say} from './api.js';
import {axisSize, hideTip, keyWalk, setEmpty, showTip, uplotTip} from './charttip.js';
import {openEvents} from './events.js';
import * as fmt from './fmt.js';

const ROLES = ['node', 'trader', 'operator', 'finance', 'admin'];
const POLL_MS = 15000;

const $ = id => document.getElementById(id);
const banner = $('banner');
let markets = [];
let stream = null, poll = null, pending = null;
let depthPlot = null, candleChart = null, candleSeries = null, volumeSeries = null;

function current()
{
	return $('market').value;
}

function setLive(state, detail)
{
	const dot = $('live').querySelector('.status-dot');
	dot.className = `status-dot ${state === 'live' ? 'live' : state === 'down' ? 'down' : ''}`;
	$('live-text').textContent = state === 'live' ? 'live' : state === 'connecting' ? 'connecting…' : detail || 'not connected';
}

// ---- depth ----

// Cumulative pages at each price: bids from the best (highest) down, asks
// from the best (lowest) up, on one shared ascending price axis. `levels`
// keeps, per point, the book's level at that price (null for the two ends
// added to draw the steps), for the tooltip.
function depthData(book)
{
	const bids = (book.bids || []).slice().sort((a, b) => b.price - a.price);
	const asks = (book.asks || []).slice().sort((a, b) => a.price - b.price);
	const prices = [...new Set([...bids.map(l => l.price), ...asks.map(l => l.price)])].sort((a, b) => a - b);
	const bidAt = new Map(), askAt = new Map();
	let sum = 0;
	for (const l of bids) {
		sum += l.pages;
		bidAt.set(l.price, sum);
	}
	sum = 0;
	for (const l of asks) {
		sum += l.pages;
		askAt.set(l.price, sum);
	}
	const bestBid = bids.length ? bids[0].price : -Infinity;
	const bestAsk = asks.length ? asks[0].price : Infinity;
	const bidY = [], askY = [];
	let run = 0;
	for (let i = prices.length - 1; i >= 0; i--) { // bids accumulate downwards
		const p = prices[i];
		if (bidAt.has(p))
			run = bidAt.get(p);
		bidY[i] = p <= bestBid ? run : null;
	}
	run = 0;
	for (let i = 0; i < prices.length; i++) {
		const p = prices[i];
		if (askAt.has(p))
			run = askAt.get(p);
		askY[i] = p >= bestAsk ? run : null;
	}
	const levels = prices.map(p => ({bid: bids.find(l => l.price === p) || null, ask: asks.find(l => l.price === p) || null}));
	// A step needs two ends: carry the bids' total out to the left and
	// the asks' total out to the right, a tenth of the span beyond.
	if (prices.length) {
		const lo = prices[0], hi = prices[prices.length - 1];
		const pad = Math.max(1, Math.round((hi - lo) / 10) || Math.round(lo / 10));
		prices.unshift(Math.max(0, lo - pad));
		bidY.unshift(bids.length ? bidY[0] : null);
		askY.unshift(null);
		prices.push(hi + pad);
		askY.push(asks.length ? askY[askY.length - 1] : null);
		bidY.push(null);
		levels.unshift(null);
		levels.push(null);
	}
	return {data: [prices, bidY, askY], levels};
}

// An axis label: three significant digits, since the tooltip and the book
// have the exact price ("$0.0002", not "$0.000200008")
function axisPrice(v)
{
	if (!Number.isFinite(v))
		return '';
	if (Math.abs(v) >= 1e7)
		return fmt.money(Math.round(v)); // a cent and up
	return `$${Number((v / 1e9).toPrecision(3))}`.replace('$-', '-$');
}

// The quantity axis steps in sizes that read round as fmt.bytes writes
// them (1 GiB, 100 GiB; not the 381.47 GiB that 100,000,000 pages are):
// pages, then MiB, then quarter GiB and up.
const GIB = 262144;
const PAGE_STEPS = [1, 2, 5, 10, 20, 50, 100, 256, 512, 1280, 2560, 5120, 12800, 25600,
                    GIB / 4, GIB / 2, ...[1, 2, 5].flatMap(m => [1, 10, 100, 1000, 10000].map(k => GIB * m * k))]
	.sort((a, b) => a - b);

let depthLevels = [];

// The depth tooltip of point i: the level's exact price (per page-year as
// the book shows it, in n$, and per GiB-year), its side, the cumulative
// pages and GiB that would trade down to (bids) or up to (asks) it, and
// the level itself. The two drawn ends are not levels: they show the
// nearest one.
function depthTip(u, i)
{
	const n = depthLevels.length;
	if (!n)
		return [];
	const k = depthLevels[i] ? i : i === 0 ? 1 : n - 2;
	const lv = depthLevels[k];
	if (!lv)
		return [];
	const l = lv.bid || lv.ask;
	const side = lv.bid ? 'bid' : 'ask';
	const cum = u.data[lv.bid ? 1 : 2][k];
	return [
		{text: `${side} at ${fmt.price(l.price)} per page-year`, cls: side === 'bid' ? 'buyside' : 'sellside'},
		`${fmt.groupDigits(String(l.price))} n$/page-year · ${fmt.pricePerGiB(l.price)} per GiB-year`,
		`this level: ${fmt.pagesAndBytes(l.pages)}, ${l.orders} ${l.orders === 1 ? 'order' : 'orders'}`,
		`cumulative ${side === 'bid' ? 'bids at this price or higher' : 'asks at this price or lower'}: ${fmt.pagesAndBytes(cum)}`
	];
}

function drawDepth(book, traded)
{
	const box = $('depth');
	const {data, levels} = depthData(book);
	depthLevels = levels;
	const width = Math.max(300, box.clientWidth);
	if (!depthPlot) {
		depthPlot = new uPlot({
			width,
			height: 240,
			// quantities from zero, so that a step's height is its size
			scales: {x: {time: false}, y: {range: (u, min, max) => [0, max > 0 ? max * 1.08 : 1]}},
			legend: {live: false}, // names the series; the tooltip has the values
			// room on the right for the last price label
			padding: [12, 36, 0, 0],
			plugins: [uplotTip(depthTip, () => depthLevels.map((l, i) => (l ? i : -1)).filter(i => i >= 0))],
			axes: [
				{space: 90, values: (u, vals) => vals.map(axisPrice)},
				{size: axisSize, incrs: PAGE_STEPS, values: (u, vals) => vals.map(v => fmt.bytes(Math.round(v)))}
			],
			series: [
				{label: 'price'},
				{label: 'bids', stroke: '#0a7d32', fill: 'rgba(10,125,50,0.15)', paths: uPlot.paths.stepped({align: -1})},
				{label: 'asks', stroke: '#b42318', fill: 'rgba(180,35,24,0.15)', paths: uPlot.paths.stepped({align: 1})}
			]
		}, data, box);
	} else {
		depthPlot.setData(data);
	}
	// "yet" only where nothing ever traded: an empty book after trades is
	// not a new market
	setEmpty(box, levels.length ? ''
	                            : traded ? 'The book is empty: no bids or offers rest in this market now.'
	                                     : 'No orders in this market yet: bids and offers show here as they arrive.');
}

function drawBook(book)
{
	const rows = [];
	const asks = (book.asks || []).slice().sort((a, b) => b.price - a.price);
	for (const l of asks)
		rows.push(levelRow('ask', 'sellside', l));
	for (const l of book.bids || [])
		rows.push(levelRow('bid', 'buyside', l));
	fillRows($('book').tBodies[0], rows, 6, 'the book is empty');
}

// A level's price links to the Trade page's form, filled: an ask to buy
// at it, a bid to sell at it
function levelRow(side, cls, l)
{
	const to = side === 'ask' ? 'buy' : 'sell';
	const q = new URLSearchParams({market: current(), side: to, price: fmt.price(l.price).slice(1).replace(/,/g, '')});
	const a = el('a', {href: `/web/trade.html?${q}`, title: `${fmt.groupDigits(String(l.price))} n$/page-year: ${to} at this price`},
	             fmt.price(l.price));
	return el('tr', {'data-side': side, 'data-price': l.price},
	          el('td', {class: cls}, side),
	          el('td', {class: 'num'}, a),
	          el('td', {class: 'num'}, fmt.pricePerGiB(l.price)),
	          el('td', {class: 'num'}, fmt.pages(l.pages)),
	          el('td', {class: 'num'}, fmt.bytes(l.pages)),
	          el('td', {class: 'num'}, l.orders));
}

// ---- trades and candles ----

// Last price, best bid and ask, the spread, and the volume of the last
// 24 hours (from hourly candles), above the book
function drawStats(book, trades, day)
{
	const bid = (book.bids || [])[0], ask = (book.asks || [])[0];
	const last = trades[0];
	const set = (id, text, title) => {
		$(id).textContent = text;
		$(id).title = title || '';
	};
	set('s-last', last ? fmt.price(last.price) : '—', last ? `${fmt.groupDigits(String(last.price))} n$/page-year at ${fmt.time(last.ts_ns)}` : '');
	set('s-bid', bid ? fmt.price(bid.price) : '—', bid ? `${fmt.pages(bid.pages)} pages` : 'no bids');
	set('s-ask', ask ? fmt.price(ask.price) : '—', ask ? `${fmt.pages(ask.pages)} pages` : 'no asks');
	if (bid && ask) {
		const sp = fmt.big(ask.price) - fmt.big(bid.price);
		set('s-spread', fmt.price(sp), `${fmt.groupDigits(sp.toString())} n$/page-year`);
	} else {
		set('s-spread', '—', 'needs a bid and an ask');
	}
	let vol = 0n, n = 0n;
	for (const c of day)
		vol += fmt.big(c.volume ?? 0), n += fmt.big(c.trades ?? 0);
	set('s-volume', `${fmt.bytes(vol)}`, `${fmt.pages(vol)} pages in ${n} trades since ${fmt.time(BigInt(Date.now() - 86400000) * 1000000n)}`);
}

function drawTrades(items)
{
	const rows = items.map(t => el('tr', {'data-trade': t.id},
	                               el('td', {}, fmt.time(t.ts_ns)),
	                               el('td', {class: t.taker_side === 'buy' ? 'buyside' : 'sellside'}, t.taker_side),
	                               el('td', {class: 'num', title: `${t.price} n$/page-year`}, fmt.price(t.price)),
	                               el('td', {class: 'num'}, fmt.pages(t.pages)),
	                               el('td', {class: 'num'}, fmt.bytes(t.pages))));
	fillRows($('trades').tBodies[0], rows, 5, 'no trades yet');
}

let candleData = []; // the candles drawn, ascending, as the API sent them
let candleSecs = 3600;

// The candle tooltip: its interval, open, high, low and close exactly
// (the same text as the book's prices), and its volume in pages and GiB.
function candleTip(c)
{
	const end = new Date((c.start + candleSecs) * 1000);
	return [
		`${fmt.time(new Date(c.start * 1000))} to ${fmt.time(end).slice(11)}`,
		`per page-year: open ${fmt.price(c.open)} · high ${fmt.price(c.high)}`,
		`low ${fmt.price(c.low)} · close ${fmt.price(c.close)}`,
		`volume ${fmt.pagesAndBytes(c.volume ?? 0)}${c.trades !== undefined ? ` in ${c.trades} ${c.trades === 1 ? 'trade' : 'trades'}` : ''}`
	];
}

function ensureCandleChart()
{
	if (candleChart)
		return;
	const box = $('candles');
	candleChart = createChart(box, {
		width: Math.max(300, box.clientWidth),
		height: 240,
		timeScale: {timeVisible: true, secondsVisible: false},
		localization: {priceFormatter: p => fmt.price(Math.round(p))},
		// the volume bars sit where the logo would; the attribution is
		// the line under the chart
		layout: {fontFamily: 'system-ui, sans-serif', attributionLogo: false}
	});
	const pf = {type: 'custom', minMove: 1, formatter: p => fmt.price(Math.round(p))};
	candleSeries = candleChart.addSeries(CandlestickSeries, {priceFormat: pf});
	volumeSeries = candleChart.addSeries(HistogramSeries, {
		priceScaleId: 'volume',
		lastValueVisible: false,
		priceLineVisible: false,
		priceFormat: {type: 'custom', minMove: 1, formatter: v => fmt.bytes(Math.round(v))},
		color: 'rgba(11,95,255,0.35)'
	});
	candleChart.priceScale('volume').applyOptions({scaleMargins: {top: 0.8, bottom: 0}});
	const at = t => candleData.find(c => c.start === t);
	candleChart.subscribeCrosshairMove(param => {
		const c = param.point && param.time !== undefined ? at(param.time) : null;
		if (c)
			showTip(box, candleTip(c), param.point.x, param.point.y);
		else if (document.activeElement !== box)
			hideTip(box);
	});
	keyWalk(box, () => candleData.length, i => {
		const c = candleData[i];
		candleChart.setCrosshairPosition(c.close, c.start, candleSeries);
		const x = candleChart.timeScale().timeToCoordinate(c.start) ?? 0;
		const y = candleSeries.priceToCoordinate(c.close) ?? 0;
		showTip(box, candleTip(c), x, y);
	}, () => {
		candleChart.clearCrosshairPosition();
		hideTip(box);
	});
}

function drawCandles(items)
{
	ensureCandleChart();
	// the price scale in steps of the market's tick: "$0.0001", not
	// "$0.000100008"
	const m = markets.find(x => x.name === current());
	if (m && m.tick > 0)
		candleSeries.applyOptions({priceFormat: {type: 'custom', minMove: m.tick, formatter: p => fmt.price(Math.round(p / m.tick) * m.tick)}});
	const asc = items.slice().reverse();
	candleData = asc;
	candleSecs = Number($('interval').value) || 3600;
	candleSeries.setData(asc.map(c => ({time: c.start, open: c.open, high: c.high, low: c.low, close: c.close})));
	volumeSeries.setData(asc.map(c => ({time: c.start, value: c.volume})));
	setEmpty($('candles'), asc.length ? '' : 'No trades in this market yet: candles show here after the first fill.');
	if (asc.length)
		candleChart.timeScale().fitContent();
}

// ---- loading ----

async function refresh()
{
	const m = current();
	if (!m)
		return;
	const iv = $('interval').value;
	try {
		const from = Math.floor(Date.now() / 1000) - 86400;
		const [book, trades, candles, day] = await Promise.all([
			api(`/v1/markets/${encodeURIComponent(m)}/book?depth=50`),
			api(`/v1/markets/${encodeURIComponent(m)}/trades?limit=50`),
			api(`/v1/markets/${encodeURIComponent(m)}/candles?interval=${iv}&limit=500`),
			api(`/v1/markets/${encodeURIComponent(m)}/candles?interval=60&from=${from}&limit=1000`)
		]);
		drawStats(book, trades.items || [], day.items || []);
		drawDepth(book, (trades.items || []).length > 0);
		drawBook(book);
		drawTrades(trades.items || []);
		drawCandles(candles.items || []);
		say(banner, '');
	} catch (e) {
		say(banner, `could not load ${m}: ${e.message}`);
	}
}

// Many events can arrive at once (one order, several fills): one reload.
function soon()
{
	if (pending)
		return;
	pending = setTimeout(() => {
		pending = null;
		refresh();
	}, 200);
}

function showInfo()
{
	const m = markets.find(x => x.name === current());
	if (!m) {
		$('market-info').textContent = '';
		return;
	}
	const bits = [`tick ${fmt.price(m.tick)}`, `lot ${fmt.pagesAndBytes(m.lot)}`];
	if (m.term_end)
		bits.push(`pages offline until ${fmt.time(m.term_end)}`);
	else
		bits.push(`recall notice ${m.notice_period_s} s`);
	$('market-info').textContent = bits.join(' · ');
}

function stop()
{
	if (stream)
		stream.stop();
	stream = null;
	clearInterval(poll);
	poll = null;
}

async function start(principal)
{
	stop();
	const why = roleProblem(principal, ROLES, 'read market data');
	if (why) {
		say(banner, why, principal ? 'error' : 'warn');
		setLive('down', 'not connected');
		$('market').replaceChildren();
		return;
	}
	try {
		markets = (await api('/v1/markets')).items || [];
	} catch (e) {
		say(banner, `could not list the markets: ${e.message}`);
		return;
	}
	const sel = $('market');
	const want = new URLSearchParams(location.search).get('market') || sel.value;
	sel.replaceChildren(...markets.map(m => el('option', {value: m.name}, m.name)));
	if (!markets.length) {
		say(banner, 'there are no markets yet; an operator creates them (POST /v1/markets)', 'warn');
		return;
	}
	if (markets.some(m => m.name === want))
		sel.value = want;
	showInfo();
	await refresh();
	// finance reads the market but has no event stream (it is for those who
	// trade and the admin): the poll keeps its page fresh
	if (principal.role === 'finance')
		setLive('polled', `refreshed every ${POLL_MS / 1000} s`); // grey: nothing is wrong
	else
		stream = openEvents(ev => {
			if (ev.event === 'fill' && ev.data && ev.data.market && ev.data.market !== current())
				return;
			if (ev.event === 'fill' || ev.event === 'order' || ev.event === 'overflow')
				soon();
		}, setLive);
	poll = setInterval(refresh, POLL_MS);
}

$('market').addEventListener('change', () => {
	showInfo();
	const u = new URL(location.href);
	u.searchParams.set('market', current());
	history.replaceState(null, '', u);
	refresh();
});
$('interval').addEventListener('change', refresh);
new ResizeObserver(() => {
	if (depthPlot)
		depthPlot.setSize({width: Math.max(300, $('depth').clientWidth), height: 240});
	if (candleChart)
		candleChart.applyOptions({width: Math.max(300, $('candles').clientWidth)});
}).observe($('depth'));
mountSession(start, ROLES);
