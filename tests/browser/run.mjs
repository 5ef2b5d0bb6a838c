// run.mjs — drives Debian's Chromium (playwright-core, never a downloaded
// browser) through ramex's pages against the ramexd that suite.sh started.
// It builds a small world through the API first: a team with two nodes, a
// trader, an operator, a finance token, the spot and perm markets.
//
// Each test counts once; the last line is "N passed, M failed". Waits for
// the page use generous limits (they wait for something to appear, they do
// not measure speed). Screenshots go to $RAMEX_BROWSER_OUT.
//
//   RAMEX_URL          http://127.0.0.1:PORT of ramexd
//   RAMEX_PID          ramexd's process id (stopped and resumed by a test)
//   RAMEX_ADMIN_TOKEN  an admin token (ramexd token create)
//   RAMEX_BROWSER_OUT  where screenshots and the console log go
//   RAMEX_WEB_ROOT     the served tree (build/web), for the static checks
//   RAMEX_BIN          build/bin, for ramex-agent

import {createHash, createHmac, randomBytes} from 'node:crypto';
import {spawn} from 'node:child_process';
import {mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import {createRequire} from 'node:module';
import {join} from 'node:path';

import * as fmt from '../../web/js/fmt.js';

const require = createRequire(import.meta.url);
const {chromium} = require('playwright-core');

const URL_ = process.env.RAMEX_URL;
const ADMIN = process.env.RAMEX_ADMIN_TOKEN;
const OUT = process.env.RAMEX_BROWSER_OUT;
const WEB = process.env.RAMEX_WEB_ROOT;
const BIN = process.env.RAMEX_BIN;
const PID = Number(process.env.RAMEX_PID);
const WAIT = 15000;

let passed = 0, failed = 0;
const consoleLog = [];

// ---- the API, as a script sees it ----

async function call(tok, method, path, body, extra = {})
{
	const h = Object.assign({Accept: 'application/json'}, extra);
	if (tok)
		h.Authorization = `Bearer ${tok}`;
	if (body !== undefined)
		h['Content-Type'] = 'application/json';
	const res = await fetch(URL_ + path, {method, headers: h, body: body === undefined ? undefined : JSON.stringify(body)});
	const text = await res.text();
	let json = null;
	try {
		json = text ? JSON.parse(text) : null;
	} catch {
		json = null;
	}
	return {status: res.status, json, text, headers: res.headers};
}

async function must(tok, method, path, body, want = [200, 201])
{
	const r = await call(tok, method, path, body);
	if (!want.includes(r.status))
		throw new Error(`${method} ${path} answered ${r.status}: ${r.text.slice(0, 300)}`);
	return r.json;
}

const W = {}; // the world

// max_pages 4 GiB: at price_max ($1 per page-year) 4 TiB would bill one
// spot contract past 64 bits of nanodollars before 2200, which the
// exchange refuses (docs/money.md, "Limits")
const market = name => ({
	name, tick: 1000, lot: 1, min_pages: 1, max_pages: 1 << 20, price_min: 1000,
	price_max: 1000000000, notice_period_s: 60, breach_penalty: 10000, delivery_deadline_s: 3600
});

async function buildWorld()
{
	const sfx = Date.now().toString(36);
	// the team and the operator have the longest names there may be (63
	// characters, no hyphen to break at): every layout test below also
	// checks that a long name neither pushes a page sideways nor hides a
	// table's figures (a 63-character team name made the pages at 390 px
	// scroll sideways, and an operator's pushed the billing summary's
	// amounts out of its box at 1280 px)
	const long = p => p + 'x'.repeat(63 - p.length);
	W.team = await must(ADMIN, 'POST', '/v1/teams', {name: long(`web${sfx}`)});
	W.nodeA = await must(ADMIN, 'POST', '/v1/nodes', {name: `web-a-${sfx}`, team_id: W.team.id});
	W.nodeB = await must(ADMIN, 'POST', '/v1/nodes', {name: `web-b-${sfx}`, team_id: W.team.id});
	W.op = await must(ADMIN, 'POST', '/v1/accounts', {name: long(`webop${sfx}`), kind: 'operator'});
	W.trader = (await must(ADMIN, 'POST', '/v1/tokens', {name: `web-trader-${sfx}`, role: 'trader', team_id: W.team.id})).token;
	W.operator = (await must(ADMIN, 'POST', '/v1/tokens', {name: `web-operator-${sfx}`, role: 'operator', account_id: W.op.id})).token;
	W.finance = (await must(ADMIN, 'POST', '/v1/tokens', {name: `web-finance-${sfx}`, role: 'finance'})).token;
	W.year = new Date().getUTCFullYear() + 1;
	await must(W.operator, 'POST', '/v1/markets', market('spot'));
	await must(W.operator, 'POST', '/v1/markets', market(`perm-${W.year}`));
}

// ---- the browser ----

let browser, context, lastPage = null;
let agent = null; // a ramex-agent this driver started

async function newPage(name)
{
	const page = await context.newPage();
	lastPage = page;
	page.errors = [];
	page.on('console', m => {
		consoleLog.push(`[${name}] ${m.type()}: ${m.text()}`);
		if (m.type() === 'error')
			page.errors.push(m.text());
	});
	page.on('pageerror', e => {
		consoleLog.push(`[${name}] pageerror: ${e.message}`);
		page.errors.push(e.message);
	});
	page.on('requestfailed', r => {
		const why = r.failure() ? r.failure().errorText : '';
		// a stream we aborted ourselves on navigation is no error
		if (!why.includes('ERR_ABORTED'))
			page.errors.push(`request failed: ${r.url()} ${why}`);
	});
	return page;
}

function noErrors(page, what)
{
	if (page.errors.length)
		throw new Error(`${what}: console errors: ${page.errors.join(' | ')}`);
}

async function shot(page, name)
{
	await page.screenshot({path: join(OUT, `${name}.png`), fullPage: true});
}

async function signIn(page, tok)
{
	await page.waitForSelector('#token', {timeout: WAIT});
	await page.fill('#token', tok);
	await page.press('#token', 'Enter'); // Enter submits
	await page.waitForSelector('#signout', {timeout: WAIT});
}

async function textOf(page, sel)
{
	return (await page.textContent(sel, {timeout: WAIT})) || '';
}

async function test(name, fn)
{
	const t0 = Date.now();
	try {
		await fn();
		passed++;
		console.log(`ok ${name} (${Date.now() - t0} ms)`);
	} catch (e) {
		failed++;
		console.log(`not ok ${name}: ${e.message.split('\n')[0]}`);
		// what the page showed when it failed
		const slug = name.replace(/[^a-z0-9]+/gi, '-').slice(0, 40);
		if (lastPage && !lastPage.isClosed())
			await lastPage.screenshot({path: join(OUT, `FAILED-${slug}.png`)}).catch(() => {});
	}
}

function assert(cond, msg)
{
	if (!cond)
		throw new Error(msg);
}

// ---- tests ----

let tradePage, marketPage;

async function main()
{
	await test('static: pages have no inline scripts and revalidate by ETag', async () => {
		for (const f of readdirSync(WEB).filter(f => f.endsWith('.html'))) {
			const html = readFileSync(join(WEB, f), 'utf8');
			for (const m of html.matchAll(/<script\b([^>]*)>/g))
				assert(/\bsrc=/.test(m[1]), `${f} has an inline script, which the CSP refuses`);
			assert(!/\son[a-z]+=/.test(html), `${f} has an inline event handler`);
		}
		const r = await call(null, 'GET', '/web/js/fmt.js');
		assert(r.status === 200, `GET /web/js/fmt.js answered ${r.status}`);
		assert(r.headers.get('cache-control') === 'no-cache',
		       `Cache-Control is ${r.headers.get('cache-control')}, want no-cache`);
		const again = await call(null, 'GET', '/web/js/fmt.js', undefined, {'If-None-Match': r.headers.get('etag')});
		assert(again.status === 304, `a request with the ETag answered ${again.status}, want 304`);
		const api = await call(ADMIN, 'GET', '/v1/whoami');
		assert(api.headers.get('cache-control') === 'no-store', 'API answers must stay no-store');
	});

	await test('start page links the three pages, no console errors', async () => {
		const page = await newPage('index');
		await page.goto(`${URL_}/`);
		for (const href of ['/web/market.html', '/web/trade.html', '/web/billing.html'])
			assert(await page.$(`main a[href="${href}"]`), `no link to ${href}`);
		await shot(page, 'index');
		noErrors(page, 'start page');
		await page.close();
	});

	for (const p of ['market', 'trade', 'billing'])
		await test(`${p} page loads signed out, asks for a token, no console errors`, async () => {
			const page = await newPage(`${p}-signed-out`);
			await page.goto(`${URL_}/web/${p}.html`);
			await page.waitForSelector('#token', {timeout: WAIT});
			const b = await textOf(page, '#banner');
			assert(/sign in/.test(b), `the banner says "${b}", want a sign-in hint`);
			await shot(page, `${p}-signed-out`);
			noErrors(page, p);
			await page.close();
		});

	await test('trade: a bad token is refused with a reason, a good one signs in and out', async () => {
		tradePage = await newPage('trade');
		const page = tradePage;
		await page.goto(`${URL_}/web/trade.html`);
		await page.waitForSelector('#token', {timeout: WAIT});
		await page.fill('#token', `rx_${'0'.repeat(64)}`);
		await page.press('#token', 'Enter');
		await page.waitForFunction(() => /not known|revoked/.test(document.querySelector('#token-error').textContent), null, {timeout: WAIT});
		// the refused token's 401 logs a "failed to load resource" line
		page.errors = page.errors.filter(x => !/status of 401/.test(x));
		await signIn(page, W.trader);
		assert(/trader/.test(await textOf(page, '#whoami')), 'whoami does not name the trader role');
		await page.click('#signout');
		await page.waitForSelector('#token', {timeout: WAIT});
		assert(await page.evaluate(() => sessionStorage.getItem('ramex.token')) === null, 'the token stayed in sessionStorage');
		await signIn(page, W.trader);
		await page.waitForSelector('#o-market option[value="spot"]', {state: 'attached', timeout: WAIT});
		noErrors(page, 'trade sign in');
	});

	await test('trade: field errors before sending, the exchange\'s detail after', async () => {
		const page = tradePage;
		await page.selectOption('#o-market', 'spot');
		const mh = await textOf(page, '#o-market-hint');
		assert(mh.includes('to $1.00') && mh.includes('lots of 1'), `market hint "${mh}"`);
		// the account picker names the team's nodes
		const opts = await page.$$eval('#o-account option', os => os.map(o => o.textContent));
		assert(opts.includes(W.nodeA.account.name) && opts.includes(W.nodeB.account.name),
		       `the account picker offers ${opts.join(', ')}`);
		await page.selectOption('#o-account', String(W.nodeA.account.id));
		await page.selectOption('#o-unit', 'GiB');
		await page.fill('#o-qty', '0.1');
		await page.fill('#o-price', '0.0001');
		await page.press('#o-price', 'Enter');
		const e = await textOf(page, '#o-qty-error');
		assert(/not a whole number of pages; use 26,214 or 26,215/.test(e), `quantity error is "${e}"`);
		assert(await page.evaluate(() => document.activeElement.id) === 'o-qty', 'focus did not move to the wrong field');
		// above the market's price_max ($1 per page-year): the form says so
		// before sending (a price past 64 bits of n$ came back as the JSON
		// parser's words)
		await page.fill('#o-qty', '1');
		await page.fill('#o-price', '2');
		await page.press('#o-price', 'Enter');
		const pe = await textOf(page, '#o-price-error');
		assert(/takes .* to \$1\.00 per page-year/.test(pe), `price error is "${pe}"`);
		// what only the exchange knows (a trader does not buy a perm
		// market for its node: the operator does): it says why
		await page.selectOption('#o-market', `perm-${W.year}`);
		await page.fill('#o-price', '0.0001');
		await page.press('#o-price', 'Enter');
		await page.waitForFunction(() => /refused/.test(document.querySelector('#o-result').textContent), null, {timeout: WAIT});
		const r = await textOf(page, '#o-result');
		assert(/perm|operator/i.test(r) && r.length > 40, `the refusal "${r}" does not explain itself`);
		await shot(page, 'trade-refused');
		await page.selectOption('#o-market', 'spot');
		// the 422 itself logs a "failed to load resource" line: expected here
		page.errors = page.errors.filter(x => !/status of 4(22|03)/.test(x));
		noErrors(page, 'trade validation');
	});

	// /v1/nodes answered 503 by the test (page.route) on the page's 5 s
	// refresh: what it listed stays, and the banner says why until a
	// refresh succeeds; a pause refused meanwhile stays said.
	await test('trade: a refresh of the nodes that fails keeps the list and the account picker; the banner clears once it answers again', async () => {
		const page = await newPage('trade-nodes-503');
		await page.setViewportSize({width: 1280, height: 800});
		await page.goto(`${URL_}/web/trade.html`);
		await signIn(page, W.trader);
		await page.waitForSelector(`#nodes tr[data-node="${W.nodeA.account.id}"]`, {timeout: WAIT});
		await page.route('**/v1/nodes', route => route.fulfill({
			status: 503, contentType: 'application/problem+json',
			body: JSON.stringify({type: 'urn:ramex:problem:database-unavailable', title: 'could not authenticate', status: 503,
			                      detail: 'the exchange cannot reach PostgreSQL to check the token; retry after a few seconds'})}));
		await page.waitForFunction(() => document.querySelector('#banner').textContent.includes('could not list the nodes'),
		                           null, {timeout: WAIT});
		const left = await page.evaluate(() => [document.querySelectorAll('#nodes tr[data-node]').length,
		                                        document.querySelectorAll('#o-account option').length]);
		assert(left[0] >= 2 && left[1] >= 2, `after a failed refresh: ${left[0]} nodes listed, ${left[1]} in the picker`);
		// an action refused while the exchange is away: the person must read it
		page.on('dialog', d => d.accept('test: the exchange is away'));
		await page.route('**/v1/nodes/*/pause', route => route.fulfill({
			status: 503, contentType: 'application/problem+json',
			body: JSON.stringify({type: 'urn:ramex:problem:database-unavailable', title: 'unavailable', status: 503,
			                      detail: 'the exchange cannot reach PostgreSQL; retry after a few seconds'})}));
		await page.click(`#nodes tr[data-node="${W.nodeA.account.id}"] button`);
		await page.waitForFunction(() => document.querySelector('#banner').textContent.includes('could not pause'),
		                           null, {timeout: WAIT});
		await page.screenshot({path: join(OUT, 'trade-banner-outage-1280.png')});
		await page.setViewportSize({width: 390, height: 844});
		await page.screenshot({path: join(OUT, 'trade-banner-outage-390.png')});
		// the exchange is back: the next refresh clears what the outage said
		await page.unroute('**/v1/nodes');
		await page.unroute('**/v1/nodes/*/pause');
		await page.waitForFunction(() => !document.querySelector('#banner').textContent.includes('could not list the nodes'),
		                           null, {timeout: WAIT});
		const b = await textOf(page, '#banner');
		assert(b.includes('could not pause'), `the refused pause is no longer said: banner "${b}"`);
		const paused = await page.getAttribute(`#nodes tr[data-node="${W.nodeA.account.id}"]`, 'data-paused');
		assert(paused === 'no', `node a is listed as paused (${paused}) after a refused pause`);
		await page.close();
	});

	await test('trade: a bid is placed, listed as open and shown in the market book', async () => {
		const page = tradePage;
		await page.check('#o-buy');
		await page.selectOption('#o-unit', 'GiB');
		await page.fill('#o-qty', '1');
		await page.fill('#o-price', '0.0001');
		const hint = await textOf(page, '#o-price-hint');
		assert(hint.includes('100,000 n$/page-year') && hint.includes('$26.2144 per GiB-year'), `price hint "${hint}"`);
		assert((await textOf(page, '#o-qty-hint')).includes('262,144 pages (1.00 GiB)'), 'quantity hint');
		await page.click('#o-submit');
		await page.waitForFunction(() => /resting in the book/.test(document.querySelector('#o-result').textContent), null, {timeout: WAIT});
		const res = await textOf(page, '#o-result');
		const id = (/order (\d+)/.exec(res) || [])[1];
		assert(id, `no order id in "${res}"`);
		W.bidId = id;
		await page.waitForSelector(`#orders tr[data-order="${id}"]`, {timeout: WAIT});
		const row = await textOf(page, `#orders tr[data-order="${id}"]`);
		assert(row.includes('$0.0001') && row.includes('262,144') && row.includes('1.00'), `order row "${row}"`);
		await shot(page, 'trade-bid');

		marketPage = await newPage('market');
		// sessionStorage is per tab: the market page signs in by itself
		await marketPage.goto(`${URL_}/web/market.html?market=spot`);
		await signIn(marketPage, W.trader);
		await marketPage.waitForSelector('#book tr[data-side="bid"][data-price="100000"]', {timeout: WAIT});
		const lvl = await textOf(marketPage, '#book tr[data-side="bid"][data-price="100000"]');
		assert(lvl.includes('262,144') && lvl.includes('$26.2144'), `book level "${lvl}"`);
		await marketPage.waitForSelector('#depth canvas', {timeout: WAIT});
		await marketPage.waitForFunction(() => /live/.test(document.querySelector('#live-text').textContent), null, {timeout: WAIT});
		await shot(marketPage, 'market-bid');
		noErrors(page, 'trade');
		noErrors(marketPage, 'market');
	});

	await test('a crossing order makes a fill that both pages show live', async () => {
		// node B (same team, another account: no self-trade) sells into the bid
		const r = await must(W.trader, 'POST', '/v1/orders',
		                     {market: 'spot', account_id: W.nodeB.account.id, side: 'sell', pages: 131072, price: 100000});
		assert(r.trades && r.trades.length === 1, `the sell made ${r.trades ? r.trades.length : 0} trades`);
		const tid = r.trades[0].trade_id;
		W.lendContract = r.trades[0].contract_id;
		// no reload: the event stream brings it
		await tradePage.waitForSelector(`#fills tr[data-trade="${tid}"]`, {timeout: WAIT});
		const f = await textOf(tradePage, `#fills tr[data-trade="${tid}"]`);
		assert(f.includes('131,072') && f.includes('0.50'), `fill row "${f}"`);
		await tradePage.waitForFunction(id => {
			const tr = document.querySelector(`#orders tr[data-order="${id}"]`);
			return tr && tr.textContent.includes('131,072');
		}, W.bidId, {timeout: WAIT});
		await tradePage.waitForSelector(`#contracts tr[data-contract="${W.lendContract}"]`, {timeout: WAIT});
		await marketPage.waitForSelector(`#trades tr[data-trade="${tid}"]`, {timeout: WAIT});
		await marketPage.waitForFunction(() => {
			const tr = document.querySelector('#book tr[data-side="bid"][data-price="100000"]');
			return tr && tr.textContent.includes('131,072');
		}, null, {timeout: WAIT});
		// above the book: last price, spread, 24 h volume
		await marketPage.waitForFunction(() => document.querySelector('#s-last').textContent === '$0.0001', null, {timeout: WAIT});
		const vol = await textOf(marketPage, '#s-volume');
		assert(vol === '0.50 GiB', `24 h volume "${vol}"`);
		assert(/—/.test(await textOf(marketPage, '#s-spread')), 'a spread without an ask');
		await shot(tradePage, 'trade-fill');
		await shot(marketPage, 'market-fill');
		noErrors(tradePage, 'trade');
		noErrors(marketPage, 'market');
	});

	await test('trade: the seller delivers a contract from the page', async () => {
		const page = tradePage;
		const sel = `#contracts tr[data-contract="${W.lendContract}"]`;
		await page.click(`${sel} button[data-move="deliver"]`);
		await page.waitForFunction(s => {
			const tr = document.querySelector(s);
			return tr && /active/.test(tr.textContent) && tr.querySelector('button[data-move="end"]');
		}, sel, {timeout: WAIT});
		assert(/contract \d+: active/.test(await textOf(page, '#banner')), 'no word that the contract is active');
		const c = await must(W.trader, 'GET', `/v1/contracts/${W.lendContract}`);
		assert(c.state === 'active', `the contract is ${c.state}`);
		noErrors(page, 'trade deliver');
	});

	await test('trade: names, who placed what; an agent\'s order is cancelled only after asking why', async () => {
		const page = tradePage;
		// node A's agent (its key signs) quotes: the trader sees who placed it
		const q = await signed(W.nodeA, 'POST', '/v1/orders', JSON.stringify({market: 'spot', side: 'sell', pages: 4096, price: 5000000}));
		assert(q.status === 201, `the agent's order answered ${q.status}: ${q.text.slice(0, 200)}`);
		const qid = JSON.parse(q.text).order.id;
		const sel = `#orders tr[data-order="${qid}"]`;
		await page.waitForSelector(sel, {timeout: WAIT});
		const row = await textOf(page, sel);
		assert(row.includes(`agent of ${W.nodeA.account.name}`) && row.includes(W.nodeA.account.name), `order row "${row}"`);
		assert(/you/.test(await textOf(page, `#orders tr[data-order="${W.bidId}"]`)), 'the trader\'s own bid is not "you"');
		// dismissing the question cancels nothing
		page.once('dialog', d => d.dismiss());
		await page.click(`${sel} button`);
		await new Promise(r => setTimeout(r, 500));
		assert((await must(W.trader, 'GET', `/v1/orders/${qid}`)).status === 'open', 'dismissed, the order was cancelled');
		// answered, the note goes with the order and the history shows it
		page.once('dialog', d => d.accept('price too low for this week'));
		await page.click(`${sel} button`);
		await page.waitForSelector(`#history tr[data-order="${qid}"]`, {timeout: WAIT});
		const h = await textOf(page, `#history tr[data-order="${qid}"]`);
		assert(h.includes('by you') && h.includes('price too low for this week') && h.includes(`agent of ${W.nodeA.account.name}`),
		       `history row "${h}"`);
		const o = await must(W.trader, 'GET', `/v1/orders/${qid}`);
		assert(o.cancel_note === 'price too low for this week' && /trader/.test(o.cancelled_by_name), `order ${JSON.stringify(o)}`);
		await shot(page, 'trade-history');
		// an agent cancelling its own quote is no news; someone else
		// cancelling the trader's order is, with names
		const own = await signed(W.nodeA, 'POST', '/v1/orders', JSON.stringify({market: 'spot', side: 'sell', pages: 4096, price: 6000000}));
		const ownId = JSON.parse(own.text).order.id;
		await page.waitForSelector(`#orders tr[data-order="${ownId}"]`, {timeout: WAIT});
		await signed(W.nodeA, 'DELETE', `/v1/orders/${ownId}`, JSON.stringify({note: 're-quote'}));
		await page.waitForSelector(`#history tr[data-order="${ownId}"]`, {timeout: WAIT});
		await new Promise(r => setTimeout(r, 600));
		const b1 = await textOf(page, '#banner');
		assert(!b1.includes(`order ${ownId}`), `an agent's re-quote made the banner say "${b1}"`);
		const mine = await must(W.trader, 'POST', '/v1/orders', {market: 'spot', account_id: W.nodeA.account.id, side: 'buy', pages: 256, price: 3000});
		await page.waitForSelector(`#orders tr[data-order="${mine.order.id}"]`, {timeout: WAIT});
		// a second trader of the team cancels it
		const other = (await must(ADMIN, 'POST', '/v1/tokens', {name: `web-trader2-${Date.now().toString(36)}`, role: 'trader', team_id: W.team.id}));
		await must(other.token, 'DELETE', `/v1/orders/${mine.order.id}`, {note: 'maintenance window'});
		await page.waitForFunction(id => document.querySelector('#banner').textContent.includes(`order ${id}`), mine.order.id, {timeout: WAIT});
		const b2 = await textOf(page, '#banner');
		assert(b2.includes('placed by you') && b2.includes('web-trader2-') && b2.includes('(trader)') && b2.includes('maintenance window') && !b2.includes('tok:'),
		       `the banner says "${b2}"`);
		noErrors(page, 'trade who placed');
	});

	await test('trade: pause and resume a node\'s automation from the page', async () => {
		const page = tradePage;
		const sel = `#nodes tr[data-node="${W.nodeA.account.id}"]`;
		await page.waitForSelector(sel, {timeout: WAIT});
		assert((await textOf(page, sel)).includes(W.team.name), 'the node row does not name its team');
		// a note that ends right to left: isolated (<bdi>), it leaves the
		// quotes where they belong (the closing one went to the line's
		// other end)
		const note = 'hand trading: תחזוקה של הצוות';
		page.once('dialog', d => d.accept(note));
		await page.click(`${sel} button`);
		await page.waitForSelector(`${sel}[data-paused="yes"]`, {timeout: WAIT});
		assert((await textOf(page, sel)).includes(`paused by you: “${note}”`), `node row "${await textOf(page, sel)}"`);
		const iso = await page.$eval(sel, tr => {
			const b = tr.querySelector('td.why bdi');
			if (!b)
				return null;
			const q = document.createRange();
			const t = b.nextSibling; // the closing quote
			q.setStart(t, 0);
			q.setEnd(t, 1);
			return {text: b.textContent, quoteRight: q.getBoundingClientRect().left >= b.getBoundingClientRect().right - 1};
		});
		assert(iso && iso.text === note && iso.quoteRight, `the note is not isolated: ${JSON.stringify(iso)}`);
		const w = await signedGet(W.nodeA, '/v1/whoami');
		assert(w.trading_paused === true && w.trading_pause_note === note, `the agent reads ${JSON.stringify(w)}`);
		await shot(page, 'trade-paused');
		await page.click(`${sel} button`);
		await page.waitForSelector(`${sel}[data-paused="no"]`, {timeout: WAIT});
		assert((await signedGet(W.nodeA, '/v1/whoami')).trading_paused === false, 'resumed, the agent still reads paused');
		noErrors(page, 'trade pause');
	});

	await test('trade: cancel the rest of the bid', async () => {
		const page = tradePage;
		await page.click(`#orders tr[data-order="${W.bidId}"] button`);
		await page.waitForSelector(`#orders tr[data-order="${W.bidId}"]`, {state: 'detached', timeout: WAIT});
		assert(/cancelled/.test(await textOf(page, '#banner')), 'no word that the order was cancelled');
		const o = await must(W.trader, 'GET', `/v1/orders/${W.bidId}`);
		assert(o.status === 'cancelled', `the order is ${o.status}`);
		noErrors(page, 'trade cancel');
	});

	await test('market: a book level\'s price opens the Trade form filled with it', async () => {
		const page = await newPage('market-click');
		const ask = await must(W.trader, 'POST', '/v1/orders', {market: 'spot', account_id: W.nodeA.account.id, side: 'sell', pages: 256, price: 7000000});
		const bid = await must(W.trader, 'POST', '/v1/orders', {market: 'spot', account_id: W.nodeB.account.id, side: 'buy', pages: 256, price: 1000});
		await page.goto(`${URL_}/web/market.html?market=spot`);
		await signIn(page, W.trader);
		await page.waitForSelector('#book tr[data-side="ask"][data-price="7000000"] a', {timeout: WAIT});
		const sp = await textOf(page, '#s-spread');
		assert(sp.startsWith('$'), `spread "${sp}" with a bid and an ask`);
		await Promise.all([page.waitForNavigation({timeout: WAIT}), page.click('#book tr[data-side="ask"][data-price="7000000"] a')]);
		await page.waitForSelector('#o-market option[value="spot"]', {state: 'attached', timeout: WAIT});
		assert(await page.inputValue('#o-price') === '0.007', `price field "${await page.inputValue('#o-price')}"`);
		assert(await page.isChecked('#o-buy'), 'an ask opens a buy');
		assert(/7,000,000 n\$\/page-year/.test(await textOf(page, '#o-price-hint')), 'the price hint');
		assert(sp === '$0.006999', `spread "${sp}"`);
		// out of the way of the tests that follow
		for (const o of [ask, bid])
			await must(W.trader, 'DELETE', `/v1/orders/${o.order.id}`);
		noErrors(page, 'market click');
		await page.close();
	});

	await test('market: the perm market shows its term', async () => {
		const page = marketPage;
		await page.selectOption('#market', `perm-${W.year}`);
		await page.waitForFunction(y => /offline until/.test(document.querySelector('#market-info').textContent), W.year, {timeout: WAIT});
		await page.waitForFunction(() => /empty/.test(document.querySelector('#book').textContent), null, {timeout: WAIT});
		await shot(page, 'market-perm');
		noErrors(page, 'market perm');
	});

	await test('market: an empty market says so inside its charts', async () => {
		// a market no one has traded in yet
		W.empty = `perm-${W.year + 1}`;
		await must(W.operator, 'POST', '/v1/markets', {...market(W.empty), price_min: 0});
		const page = await newPage('market-empty');
		await page.goto(`${URL_}/web/market.html?market=${W.empty}`);
		await signIn(page, W.trader);
		await page.waitForSelector('#depth .chart-empty', {timeout: WAIT});
		for (const [box, want] of [['#depth', /no orders in this market yet/i], ['#candles', /no trades in this market yet/i]]) {
			const t = await textOf(page, `${box} .chart-empty`);
			assert(want.test(t), `${box} says "${t}"`);
			// inside the chart's box, over its plot, and visible
			const r = await page.evaluate(b => {
				const e = document.querySelector(`${b} .chart-empty`).getBoundingClientRect();
				const c = document.querySelector(b).getBoundingClientRect();
				return {inside: e.left >= c.left && e.right <= c.right && e.top >= c.top && e.bottom <= c.bottom, h: e.height};
			}, box);
			assert(r.inside && r.h > 20 && await page.isVisible(`${box} .chart-empty`), `${box}'s empty state is not inside it`);
		}
		await shot(page, 'market-empty');
		// the first order takes the empty state away
		W.tipOrders = [
			// in a perm market only the operator buys
			[W.operator, await must(W.operator, 'POST', '/v1/orders', {market: W.empty, side: 'buy', pages: 1000, price: 99000000})],
			[W.operator, await must(W.operator, 'POST', '/v1/orders', {market: W.empty, side: 'buy', pages: 300000, price: 100001000})],
			[W.trader, await must(W.trader, 'POST', '/v1/orders', {market: W.empty, account_id: W.nodeB.account.id, side: 'sell', pages: 262144, price: 150000000})]
		].map(([tok, r]) => [tok, r.order.id]);
		// resting orders of others come with the 15 s poll: read them now
		await page.reload();
		await page.waitForSelector('#book tr[data-side="ask"]', {timeout: WAIT});
		await page.waitForSelector('#depth .chart-empty', {state: 'detached', timeout: WAIT});
		assert(await page.isVisible('#candles .chart-empty'), 'orders without a trade took the candles\' empty state away');
		noErrors(page, 'market empty');
		W.tipPage = page;
	});

	await test('market: the depth chart\'s tooltip has each level\'s exact price and cumulative pages, by mouse and by keys', async () => {
		const page = W.tipPage;
		const tip = '#depth .chart-tip';
		// by keys: Tab reaches the chart, Home is the lowest level
		await page.focus('#depth');
		await page.keyboard.press('Home');
		await page.waitForSelector(tip, {state: 'visible', timeout: WAIT});
		const lines = [
			['bid at $0.099 per page-year', '99,000,000 n$/page-year', `${fmt.pricePerGiB(99000000)} per GiB-year`,
			 'this level: 1,000 pages (3.91 MiB), 1 order', `bids at this price or higher: ${fmt.pagesAndBytes(301000)}`],
			// a price the axis rounds ($0.1) is exact here
			['bid at $0.100001 per page-year', '100,001,000 n$/page-year', `${fmt.pricePerGiB(100001000)} per GiB-year`,
			 `this level: ${fmt.pagesAndBytes(300000)}, 1 order`, `bids at this price or higher: ${fmt.pagesAndBytes(300000)}`],
			['ask at $0.15 per page-year', '150,000,000 n$/page-year', 'asks at this price or lower: 262,144 pages (1.00 GiB)']
		];
		for (let i = 0; i < lines.length; i++) {
			if (i)
				await page.keyboard.press('ArrowRight');
			const t = await textOf(page, tip);
			for (const want of lines[i])
				assert(t.includes(want), `level ${i}: the tooltip "${t}" lacks "${want}"`);
		}
		// the tip stays inside the chart and is what the chart's description points at
		const inside = await page.evaluate(() => {
			const t = document.querySelector('#depth .chart-tip').getBoundingClientRect();
			const c = document.querySelector('#depth').getBoundingClientRect();
			return t.left >= c.left - 1 && t.right <= c.right + 1 && t.top >= c.top - 1 && t.bottom <= c.bottom + 1;
		});
		assert(inside, 'the tooltip sticks out of the chart');
		assert(await page.getAttribute('#depth', 'aria-describedby') === await page.getAttribute(tip, 'id'), 'aria-describedby');
		await shot(page, 'market-depth-tip-keys');
		await page.keyboard.press('Escape');
		assert(!(await page.isVisible(tip)), 'Escape left the tooltip up');
		// by mouse: the pointer over the plot shows a level, leaving hides it
		const over = await page.$('#depth .u-over');
		const b = await over.boundingBox();
		await page.mouse.move(b.x + b.width * 0.9, b.y + b.height / 2);
		await page.waitForSelector(tip, {state: 'visible', timeout: WAIT});
		assert(/ask at \$0\.15 per page-year/.test(await textOf(page, tip)), `hovered near the right: "${await textOf(page, tip)}"`);
		await shot(page, 'market-depth-tip-mouse');
		await page.mouse.move(b.x + b.width / 2, b.y + b.height + 200);
		await page.waitForSelector(tip, {state: 'hidden', timeout: WAIT});
		for (const [tok, id] of W.tipOrders)
			await must(tok, 'DELETE', `/v1/orders/${id}`);
		noErrors(page, 'market depth tooltip');
		await page.close();
	});

	await test('market: the price history\'s tooltip has a candle\'s exact prices and volume', async () => {
		const page = marketPage;
		await page.selectOption('#market', 'spot');
		await page.waitForSelector('#trades tr[data-trade]', {timeout: WAIT});
		const c = (await must(W.trader, 'GET', '/v1/markets/spot/candles?interval=3600&limit=1')).items[0];
		await page.focus('#candles');
		await page.keyboard.press('End'); // the newest candle
		await page.waitForSelector('#candles .chart-tip', {state: 'visible', timeout: WAIT});
		const t = await textOf(page, '#candles .chart-tip');
		for (const want of [`open ${fmt.price(c.open)}`, `high ${fmt.price(c.high)}`, `low ${fmt.price(c.low)}`, `close ${fmt.price(c.close)}`,
		                    `volume ${fmt.pagesAndBytes(c.volume)} in ${c.trades} trade`])
			assert(t.includes(want), `the candle tooltip "${t}" lacks "${want}"`);
		await shot(page, 'market-candle-tip');
		await page.keyboard.press('Escape');
		noErrors(page, 'market candle tooltip');
	});

	await test('trade: a market with no floor says "up to"; a perm contract\'s term end has its year', async () => {
		await must(W.operator, 'POST', '/v1/orders', {market: `perm-${W.year}`, side: 'buy', pages: 256, price: 200000});
		const r = await must(W.trader, 'POST', '/v1/orders', {market: `perm-${W.year}`, account_id: W.nodeB.account.id, side: 'sell', pages: 256, price: 200000});
		assert(r.trades && r.trades.length === 1, 'the perm offer did not trade');
		const c = await must(W.trader, 'GET', `/v1/contracts/${r.trades[0].contract_id}`);
		const page = await newPage('trade-perm');
		await page.goto(`${URL_}/web/trade.html`);
		await signIn(page, W.trader);
		await page.waitForSelector(`#o-market option[value="${W.empty}"]`, {state: 'attached', timeout: WAIT});
		await page.selectOption('#o-market', W.empty);
		const h = await textOf(page, '#o-market-hint');
		assert(h.startsWith('price up to $1.00 in steps of'), `market hint "${h}" (price_min 0 read "$0.00 to")`);
		const sel = `#contracts tr[data-contract="${c.id}"]`;
		await page.waitForSelector(sel, {timeout: WAIT});
		const cells = await page.$$eval(`${sel} td`, tds => tds.map(t => t.textContent));
		const want = fmt.time(c.term_end).slice(0, 10);
		assert(/^\d{4}-\d\d-\d\d$/.test(want) && cells.includes(want), `contract row ${cells.join(' | ')}, want the term end ${want}`);
		noErrors(page, 'trade perm');
		await page.close();
	});

	await test('trade: Tab walks the order form in reading order', async () => {
		const t = tradePage;
		await t.focus('#o-market');
		const order = [];
		for (let i = 0; i < 12; i++) {
			order.push(await t.evaluate(() => document.activeElement.id || document.activeElement.name));
			await t.keyboard.press('Tab');
		}
		const want = ['o-market', 'o-buy', 'o-account', 'o-qty', 'o-unit', 'o-price', 'o-tif', 'o-post', 'o-coid', 'o-submit'];
		const seen = order.filter(id => want.includes(id));
		assert(seen.slice(0, want.length).join(' ') === want.join(' '), `tab order ${order.join(' → ')}`);
		noErrors(t, 'trade keyboard');
	});

	await test('market: the event stream reconnects after it is cut', async () => {
		const page = await newPage('market-reconnect');
		// every stream request fails until the route is lifted
		const stream = /\/v1\/events(\?|$)/; // with the page's ?keepalive_s=
		await page.route(stream, route => route.abort('connectionreset'));
		await page.goto(`${URL_}/web/market.html?market=spot`);
		await signIn(page, W.trader);
		await page.waitForFunction(() => /reconnecting/.test(document.querySelector('#live-text').textContent), null, {timeout: WAIT});
		await page.unroute(stream);
		await page.waitForFunction(() => document.querySelector('#live-text').textContent === 'live', null, {timeout: WAIT});
		// and what it carries reaches the page: a new trade shows up
		await must(W.trader, 'POST', '/v1/orders', {market: 'spot', account_id: W.nodeA.account.id, side: 'buy', pages: 4096, price: 90000});
		const r = await must(W.trader, 'POST', '/v1/orders', {market: 'spot', account_id: W.nodeB.account.id, side: 'sell', pages: 4096, price: 90000});
		assert(r.trades && r.trades.length === 1, 'the crossing order did not trade');
		await page.waitForSelector(`#trades tr[data-trade="${r.trades[0].trade_id}"]`, {timeout: WAIT});
		// the cuts themselves were logged as failed loads: expected here
		page.errors = page.errors.filter(x => !/v1\/events|ERR_CONNECTION_RESET|ERR_FAILED/.test(x));
		noErrors(page, 'market reconnect');
		await page.close();
	});

	await test('market: finance reads the market (polled, no stream), no request refused', async () => {
		const page = await newPage('market-finance');
		await page.goto(`${URL_}/web/market.html?market=spot`);
		await signIn(page, W.finance);
		await page.waitForSelector('#trades tr[data-trade]', {timeout: WAIT});
		await page.waitForFunction(() => /refreshed every/.test(document.querySelector('#live-text').textContent), null, {timeout: WAIT});
		// a poll is not a fault: the dot is not the red of a lost stream
		assert(!(await page.getAttribute('#live .status-dot', 'class')).includes('down'), 'finance\'s poll shows a red dot');
		// spot's book is empty after its trades: not "no orders yet"
		await page.waitForSelector('#depth .chart-empty', {timeout: WAIT});
		const e = await textOf(page, '#depth .chart-empty');
		assert(/book is empty/.test(e) && !/yet/.test(e), `spot's empty book after trades says "${e}"`);
		assert(!(await textOf(page, '#banner')).trim(), `banner "${await textOf(page, '#banner')}"`);
		noErrors(page, 'market as finance');
		await page.close();
	});

	await test('trade: admin reads the page (nodes, orders, history), the form is off', async () => {
		const page = await newPage('trade-admin');
		await page.goto(`${URL_}/web/trade.html`);
		await signIn(page, ADMIN);
		await page.waitForSelector(`#nodes tr[data-node="${W.nodeA.account.id}"]`, {timeout: WAIT});
		await page.waitForSelector('#history tr[data-status]', {timeout: WAIT});
		assert(!(await page.isVisible('#order')), 'the admin is shown an order form');
		assert(/reads this page/.test(await textOf(page, '#banner')), 'no word that the admin only reads');
		noErrors(page, 'trade as admin');
		await page.close();
	});

	await test('billing: an invoice is listed, opened with its lines, and its CSV downloaded', async () => {
		// an offline contract: the operator's bid, node B's offer
		// at the market's top price ($1 per page-year) a few seconds of
		// 1 GiB come to a couple of cents, so the invoice is not $0.00
		await must(W.operator, 'POST', '/v1/orders', {market: 'spot', side: 'buy', pages: 262144, price: 1000000000});
		const s = await must(W.trader, 'POST', '/v1/orders',
		                     {market: 'spot', account_id: W.nodeB.account.id, side: 'sell', pages: 262144, price: 1000000000});
		assert(s.trades && s.trades.length === 1, 'the offer did not meet the operator\'s bid');
		const cid = s.trades[0].contract_id;
		const d = await call(W.trader, 'POST', `/v1/contracts/${cid}/deliver`, {note: 'browser test'});
		assert(d.status === 200, `deliver answered ${d.status}: ${d.text.slice(0, 200)}`);
		const startNs = BigInt(Date.now() + 50) * 1000000n;
		await new Promise(r => setTimeout(r, 2200));
		const endNs = BigInt(Date.now() - 50) * 1000000n;
		const secs = (endNs - startNs) / 1000000000n;
		const ps = 262144n * secs;
		const body = {
			reports: [{
				epoch: 1, seq: 1, contract_id: cid,
				period_start_ns: 0, period_end_ns: 0,
				page_seconds: Number(ps), kmod_page_seconds: Number(ps), kmod_pages: 262144
			}]
		};
		// the ns times do not fit a JS number exactly: splice them in as text
		const text = JSON.stringify(body).replace('"period_start_ns":0', `"period_start_ns":${startNs}`)
		                                 .replace('"period_end_ns":0', `"period_end_ns":${endNs}`);
		const u = await signed(W.nodeB, 'POST', '/v1/usage', text);
		assert(u.status === 200, `POST /v1/usage answered ${u.status}: ${u.text.slice(0, 300)}`);
		// billed now, and again after a second report of the same
		// contract (the module's counter is cumulative): two invoice lines
		// of the exchange (one a run), which the page shows as one line
		// for the contract's month, the two report lines a click away
		const run1 = await call(ADMIN, 'POST', '/v1/billing/run', {});
		assert([200, 201, 202].includes(run1.status), `POST /v1/billing/run answered ${run1.status}`);
		await new Promise(r => setTimeout(r, 1100));
		const end2 = BigInt(Date.now() - 50) * 1000000n;
		const ps2 = 262144n * ((end2 - endNs) / 1000000000n);
		const text2 = JSON.stringify({reports: [{epoch: 1, seq: 2, contract_id: cid, period_start_ns: 0, period_end_ns: 0,
		                                         page_seconds: Number(ps2), kmod_page_seconds: Number(ps + ps2), kmod_pages: 262144}]})
		                  .replace('"period_start_ns":0', `"period_start_ns":${endNs}`)
		                  .replace('"period_end_ns":0', `"period_end_ns":${end2}`);
		const u2 = await signed(W.nodeB, 'POST', '/v1/usage', text2);
		assert(u2.status === 200, `the second report answered ${u2.status}: ${u2.text.slice(0, 300)}`);
		const run = await call(ADMIN, 'POST', '/v1/billing/run', {});
		assert(run.status === 200 || run.status === 201 || run.status === 202,
		       `POST /v1/billing/run answered ${run.status}: ${run.text.slice(0, 200)} (is billing in this ramexd?)`);

		const page = await newPage('billing');
		await page.goto(`${URL_}/web/billing.html`);
		await signIn(page, W.finance);
		await page.waitForSelector('#invoices tr[data-invoice]', {timeout: WAIT});
		const rows = await page.$$eval('#invoices tr[data-invoice]', trs => trs.map(t => t.textContent));
		assert(rows.length >= 2, `${rows.length} invoices listed, want the buyer's and the seller's`);
		await page.waitForFunction(() => document.querySelector('#summary tbody tr td.num'), null, {timeout: WAIT});
		const first = await page.getAttribute('#invoices tr[data-invoice]', 'data-invoice');
		await page.click(`#invoices tr[data-invoice="${first}"] button`);
		await page.waitForFunction(id => document.querySelector('#invoice-head').textContent.includes(`invoice ${id}`), first, {timeout: WAIT});
		assert(/total -?\$0\.0[1-9]/.test(await textOf(page, '#invoice-head')),
		       `the invoice head "${await textOf(page, '#invoice-head')}" lacks the cents`);
		const lines = await page.$$('#lines tbody tr[data-line]');
		assert(lines.length >= 1 && !/no lines/.test(await textOf(page, '#lines tbody')), 'the invoice shows no lines');
		// one line per contract and month, its reports a click away
		const head = await textOf(page, '#invoice-head');
		assert(/due \d{4}-\d\d-\d\d/.test(head) && /draft|final/.test(head), `the invoice head "${head}" lacks due date or status`);
		const cids = await page.$$eval('#lines tbody tr[data-line]', trs => trs.map(t => t.children[0].textContent));
		assert(new Set(cids).size === cids.length, `contracts repeat in the lines: ${cids.join(', ')}`);
		await page.click('#lines tbody tr[data-line] button[aria-expanded]');
		const detail = await page.$$('#lines tbody tr[data-detail]:not([hidden])');
		assert(detail.length === 2, `${detail.length} report lines opened, want 2`);
		// the lines visibly add up: exact amounts, to the nanodollar
		await page.check('#b-exact');
		await page.waitForFunction(() => /\$\d+\.\d{9}/.test(document.querySelector('#invoice-head').textContent), null, {timeout: WAIT});
		const total = /total (-?\$[\d,.]+)/.exec(await textOf(page, '#invoice-head'))[1];
		const foot = (await textOf(page, '#lines tfoot')).trim();
		assert(foot.includes(total), `the lines' total "${foot}" is not the invoice's ${total}`);
		// the chart's tooltip: this month's revenue and spend, exactly
		const month = new Date().toISOString().slice(0, 7);
		const sumRows = (await must(W.finance, 'GET', `/v1/billing/summary?from=${month}&to=${month}&by=account`)).items || [];
		const rev = sumRows.reduce((a, r) => a + fmt.big(r.revenue ?? 0), 0n), spend = sumRows.reduce((a, r) => a + fmt.big(r.spend ?? 0), 0n);
		await page.focus('#chart');
		await page.keyboard.press('End');
		await page.waitForSelector('#chart .chart-tip', {state: 'visible', timeout: WAIT});
		const ct = await textOf(page, '#chart .chart-tip');
		assert(ct.includes(month) && ct.includes(`revenue ${fmt.amount(rev, true)}`) && ct.includes(`spend ${fmt.amount(spend, true)}`),
		       `the chart's tooltip "${ct}", want ${month}, revenue ${fmt.amount(rev, true)}, spend ${fmt.amount(spend, true)}`);
		await page.keyboard.press('Escape');
		// an open invoice with exact amounts fits the page (its "reconciled"
		// column was cut at 1366 px)
		for (const width of [1280, 1366]) {
			await page.setViewportSize({width, height: 900});
			await new Promise(r => setTimeout(r, 300));
			const over = await page.evaluate(overflowing);
			assert(!over.length, `at ${width} px with exact amounts: ${over.join('; ')}`);
		}
		await page.setViewportSize({width: 1366, height: 768});
		await shot(page, 'billing-exact');
		await page.uncheck('#b-exact');
		await page.emulateMedia({media: 'print'});
		await shot(page, 'billing-invoice-print');
		await page.emulateMedia({media: 'screen'});
		const [dl] = await Promise.all([page.waitForEvent('download', {timeout: WAIT}), page.click('#csv')]);
		assert(new RegExp(`invoice-${first}\\b.*\\.csv$`).test(dl.suggestedFilename()), `file name ${dl.suggestedFilename()}`);
		const path = join(OUT, dl.suggestedFilename());
		await dl.saveAs(path);
		const csv = readFileSync(path, 'utf8').trim().split('\n');
		assert(csv.length >= 2, `the CSV has ${csv.length} lines`);
		assert(/Billing|Period|Cost/i.test(csv[0]), `CSV header "${csv[0]}" lacks FOCUS-style columns`);
		await shot(page, 'billing-invoice');
		// per team: the nodes' team earns, the operator (no team) spends
		await page.selectOption('#b-by', 'team');
		await page.press('#b-to', 'Enter');
		await page.waitForFunction(t => [...document.querySelectorAll('#summary tbody tr')].some(tr => tr.textContent.includes(t)),
		                           W.team.name, {timeout: WAIT});
		assert(await textOf(page, '#summary-key') === 'team', 'the summary is not per team');
		noErrors(page, 'billing');
		await page.close();
	});

	await test('billing: the operator and the trader each see their own invoices', async () => {
		for (const [tok, who, mine] of [[W.operator, 'operator', [W.op.name]],
		                                [W.trader, 'trader', [W.nodeA.account.name, W.nodeB.account.name]]]) {
			const page = await newPage(`billing-${who}`);
			await page.goto(`${URL_}/web/billing.html`);
			await signIn(page, tok);
			await page.waitForSelector('#invoices tr[data-invoice]', {timeout: WAIT});
			const rows = await page.$$eval('#invoices tr[data-invoice]', trs => trs.map(t => t.children[1].textContent));
			assert(rows.length >= 1 && rows.every(r => mine.some(n => r.includes(n))),
			       `${who} sees invoices of ${rows.join(', ')}, want only ${mine.join(', ')}`);
			await page.waitForFunction(() => document.querySelector('#summary tbody tr td.num'), null, {timeout: WAIT});
			const sum = await page.$$eval('#summary tbody tr', trs => trs.map(t => t.textContent));
			assert(sum.every(r => mine.some(n => r.includes(n))), `${who}'s summary rows: ${sum.join(' | ')}`);
			assert((await textOf(page, '#b-scope')).length > 10, 'no word whose invoices these are');
			const first = await page.getAttribute('#invoices tr[data-invoice]', 'data-invoice');
			await page.click(`#invoices tr[data-invoice="${first}"] button`);
			await page.waitForFunction(id => document.querySelector('#invoice-head').textContent.includes(`invoice ${id}`), first, {timeout: WAIT});
			const [dl] = await Promise.all([page.waitForEvent('download', {timeout: WAIT}), page.click('#csv')]);
			assert(/\.csv$/.test(dl.suggestedFilename()), `file name ${dl.suggestedFilename()}`);
			await shot(page, `billing-${who}`);
			noErrors(page, `billing as ${who}`);
			await page.close();
		}
	});

	// The summary is answered by the test (page.route): amounts of a few
	// n$, then a 503.
	await test('billing: a few n$ read whole on the chart\'s axis; a failed reload leaves no stale total or chart', async () => {
		const page = await newPage('billing-tiny');
		const now = new Date();
		let fail = false;
		await page.route('**/v1/billing/summary*', route => route.fulfill(fail
			? {status: 503, contentType: 'application/problem+json',
			   body: JSON.stringify({type: 'urn:ramex:problem:database-unavailable', title: 'database unavailable', status: 503,
			                         detail: 'the exchange cannot reach PostgreSQL; retry after a few seconds'})}
			: {status: 200, contentType: 'application/json',
			   body: JSON.stringify({by: 'account', items: [{year: now.getUTCFullYear(), month: now.getUTCMonth() + 1, account_id: 1,
			                                                 account: 'tiny', spend: 4, revenue: 4, offline_credits: null,
			                                                 bought_page_seconds: 1, sold_page_seconds: 1}]})}));
		await page.goto(`${URL_}/web/billing.html`);
		await signIn(page, W.finance);
		await page.waitForFunction(() => document.querySelector('#summary tfoot td.num'), null, {timeout: WAIT});
		await new Promise(r => setTimeout(r, 500));
		// the y axis is as wide as "$0.000000004" (uPlot's axis size holds
		// its ticks and gap, 15 px, beside the label)
		const [axis, label] = await page.evaluate(() => {
			const y = [...document.querySelectorAll('#chart .u-axis')].find(a => a.offsetHeight > a.offsetWidth);
			const c = document.createElement('canvas').getContext('2d');
			c.font = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';
			return [y ? y.offsetWidth : 0, c.measureText('$0.000000004').width];
		});
		assert(axis - 15 >= label, `the y axis is ${axis} px for a ${Math.round(label)} px label`);
		await shot(page, 'billing-tiny');
		noErrors(page, 'billing with tiny amounts');
		fail = true;
		await page.click('#b-show');
		await page.waitForFunction(() => document.querySelector('#banner').textContent.includes('billing summary'), null, {timeout: WAIT});
		const left = await page.evaluate(() => [document.querySelector('#summary tfoot').textContent.trim(),
		                                        document.querySelector('#summary tbody').textContent.trim()]);
		assert(left[0] === '', `after a failed reload the total row still says "${left[0]}" beside "${left[1]}"`);
		await page.close();
	});

	await test('trade: a long order history scrolls whole rows: none cut at the box\'s edge, the last one fully shown', async () => {
		// 30 orders placed and cancelled, some notes long enough to wrap
		for (let i = 0; i < 30; i++) {
			const o = await must(W.trader, 'POST', '/v1/orders', {market: 'spot', account_id: W.nodeA.account.id, side: 'buy', pages: 256 + i, price: 2000});
			const note = i % 4 ? 'tidying up' : 'replaced by a larger bid for the batch jobs that start tonight, see the capacity plan for week 50';
			await must(W.trader, 'DELETE', `/v1/orders/${o.order.id}`, {note});
		}
		for (const width of [1280, 1920]) {
			const ctx = await browser.newContext({viewport: {width, height: 900}});
			const page = await ctx.newPage();
			lastPage = page;
			await page.goto(`${URL_}/web/trade.html`);
			await signIn(page, W.trader);
			await page.waitForFunction(() => document.querySelectorAll('#history tr[data-order]').length >= 30, null, {timeout: WAIT});
			await new Promise(r => setTimeout(r, 300));
			const m = {
				scrolls: await page.evaluate(() => {
					const box = document.querySelector('#history').closest('.scroll');
					return box.scrollHeight > box.clientHeight + 10;
				}),
				cut: await page.evaluate(cutRows)
			};
			assert(m.scrolls, `the history does not scroll at ${width} px: the test shows nothing`);
			assert(!m.cut.length, `at ${width} px: ${m.cut.join('; ')}`);
			await page.evaluate(() => document.querySelector('#history').closest('.scroll').scrollIntoView());
			await shot(page, `trade-history-long-${width}`);
			await ctx.close();
		}
	});

	await test('trade: with a real agent, a trader\'s bid for its node survives the agent\'s samples; paused, the agent places nothing; resumed, it quotes', async () => {
		// node C and its agent (the sim backend: 256 MiB of 2 GiB in use, so it offers)
		const C = await must(ADMIN, 'POST', '/v1/nodes', {name: `web-c-${Date.now().toString(36)}`, team_id: W.team.id});
		const cid = C.account.id;
		const dir = join(OUT, 'agent-c');
		rmSync(dir, {recursive: true, force: true});
		mkdirSync(dir, {recursive: true});
		writeFileSync(join(dir, 'secret'), `${C.secret}\n`, {mode: 0o600});
		writeFileSync(join(dir, 'usage'), '65536\n');
		const status = join(dir, 'status.prom');
		const args = [`--exchange_url=${URL_}`, `--key_id=${C.key_id}`, `--secret_file=${join(dir, 'secret')}`, '--backend=sim',
		              '--sim_total_pages=524288', '--sim_usage_pages=65536', `--sim_usage_file=${join(dir, 'usage')}`,
		              `--spool=${join(dir, 'spool')}`, `--status_file=${status}`, '--sample_s=1', '--report_s=1', '--poll_s=2',
		              '--spot_market=spot', '--perm_market=', '--tick=1000', '--margin_min_pages=4096', '--spot_floor=100000',
		              '--stall_value=10', '--log_level=debug'];
		const log = openSync(join(dir, 'agent.log'), 'w');
		agent = spawn(join(BIN, 'ramex-agent'), args, {stdio: ['ignore', log, log]});
		const metric = name => {
			try {
				const m = new RegExp(`^${name} (\\d+)`, 'm').exec(readFileSync(status, 'utf8'));
				return m ? Number(m[1]) : -1;
			} catch {
				return -1;
			}
		};
		const samples = async n => {
			const s0 = metric('ramex_agent_samples_total');
			for (let i = 0; i < 300 && metric('ramex_agent_samples_total') < s0 + n; i++)
				await new Promise(r => setTimeout(r, 100));
			assert(metric('ramex_agent_samples_total') >= s0 + n, `the agent took no ${n} samples (see agent-c/agent.log)`);
		};
		const open = async () => ((await must(W.trader, 'GET', '/v1/orders?status=open&limit=200')).items || []).filter(o => o.account_id === cid);
		const agentOrders = async () => ((await must(W.trader, 'GET', '/v1/orders?limit=200')).items || []).filter(o => o.account_id === cid && o.by_agent);
		const until = async (what, fn) => {
			for (let i = 0; i < 300; i++) {
				if (await fn())
					return;
				await new Promise(r => setTimeout(r, 100));
			}
			throw new Error(`${what} (see agent-c/agent.log)`);
		};

		let page;
		try {
			page = await newPage('trade-agent');
			await page.goto(`${URL_}/web/trade.html`);
			await signIn(page, W.trader);
			// the agent quotes: the page shows its offer, placed by "agent of" the node
			await until('the agent does not quote', async () => (await open()).some(o => o.by_agent));
			const quote = (await open()).find(o => o.by_agent);
			await page.waitForSelector(`#orders tr[data-order="${quote.id}"][data-by="agent"]`, {timeout: WAIT});
			// a trader's bid for node C, from the page's form, under the agent's ask
			await page.selectOption('#o-market', 'spot');
			await page.check('#o-buy');
			await page.selectOption('#o-account', String(cid));
			await page.selectOption('#o-unit', 'pages');
			await page.fill('#o-qty', '1024');
			await page.fill('#o-price', '0.000001');
			// a small order's yearly value is readable, not "$0.00"
			const ph = await textOf(page, '#o-price-hint');
			assert(ph.includes('$0.001 per year for this order'), `price hint "${ph}"`);
			await page.click('#o-submit');
			await page.waitForFunction(() => /resting in the book/.test(document.querySelector('#o-result').textContent), null, {timeout: WAIT});
			const bid = (/order (\d+)/.exec(await textOf(page, '#o-result')) || [])[1];
			assert(bid, 'no order id for the bid');
			await samples(5);
			const b = await must(W.trader, 'GET', `/v1/orders/${bid}`);
			assert(b.status === 'open' && !b.cancelled_by, `after 5 samples of the agent the bid is ${b.status}, cancelled by ${b.cancelled_by}: ${b.cancel_note}`);
			await page.waitForSelector(`#orders tr[data-order="${bid}"][data-by="person"]`, {timeout: WAIT});
			assert(/you/.test(await textOf(page, `#orders tr[data-order="${bid}"]`)), 'the bid is not "you"');

			// paused from the page: the agent withdraws its quote and places nothing
			const row = `#nodes tr[data-node="${cid}"]`;
			page.once('dialog', d => d.accept('trading by hand'));
			await page.click(`${row} button`);
			await page.waitForSelector(`${row}[data-paused="yes"]`, {timeout: WAIT});
			await until('paused, the agent still quotes', async () => metric('ramex_agent_paused') === 1 && !(await open()).some(o => o.by_agent));
			const placed = (await agentOrders()).length;
			await samples(5);
			assert((await agentOrders()).length === placed, 'paused, the agent placed an order');
			assert((await open()).some(o => String(o.id) === bid), 'paused, the trader\'s bid went');
			await page.waitForSelector(`#orders tr[data-order="${quote.id}"]`, {state: 'detached', timeout: WAIT});
			await shot(page, 'trade-agent-paused');
			// resumed from the page: it quotes again (it was alive all along)
			await page.click(`${row} button`);
			await page.waitForSelector(`${row}[data-paused="no"]`, {timeout: WAIT});
			await until('resumed, the agent does not quote', async () => (await agentOrders()).length > placed);
		} finally {
			// out of the way of the tests that follow, passed or not: node C
			// paused (its agent withdraws its quote), the agent stopped, what
			// is left of C's orders cancelled
			await call(W.trader, 'POST', `/v1/nodes/${cid}/pause`, {note: 'end of the test'});
			await until('the agent does not withdraw', async () => !(await open()).some(o => o.by_agent)).catch(() => {});
			agent.kill('SIGTERM');
			agent = null;
			for (const o of await open())
				await call(W.trader, 'DELETE', `/v1/orders/${o.id}`, {note: 'end of the test'});
		}
		noErrors(page, 'trade with an agent');
		await page.close();
	});

	// ramexd frozen (SIGSTOP): its connections stay open and silent. The
	// live mark must not stay green: after two missed keep-alives (the
	// page asks for one every 5 s) it says the exchange is silent, and it
	// is live again once ramexd runs.
	await test('trade: a frozen exchange is said to be silent within two keep-alives, live again once it runs', async () => {
		assert(PID > 0, 'RAMEX_PID is not set');
		const page = await newPage('trade-frozen');
		await page.setViewportSize({width: 1280, height: 800});
		await page.goto(`${URL_}/web/trade.html`);
		await signIn(page, W.trader);
		await page.waitForFunction(() => document.querySelector('#live-text').textContent === 'live', null, {timeout: WAIT});
		process.kill(PID, 'SIGSTOP');
		try {
			await page.waitForFunction(() => {
				const dot = document.querySelector('#live .status-dot');
				return dot.classList.contains('down') &&
				       /no word from the exchange for 11 s/.test(document.querySelector('#live-text').textContent);
			}, null, {timeout: 2 * WAIT});
			await page.screenshot({path: join(OUT, 'trade-frozen-1280.png')});
			await page.setViewportSize({width: 390, height: 844});
			await page.locator('#live').scrollIntoViewIfNeeded();
			await page.screenshot({path: join(OUT, 'trade-frozen-390.png')});
		} finally {
			process.kill(PID, 'SIGCONT');
		}
		await page.waitForFunction(() => document.querySelector('#live-text').textContent === 'live', null, {timeout: 3 * WAIT});
		await page.close();
	});

	await test('every page, every role, at 1280, 1366 and 1920 px: nothing overflows its box', async () => {
		const roles = [['trader', W.trader], ['operator', W.operator], ['finance', W.finance], ['admin', ADMIN]];
		const pages = {market: ['trader', 'operator', 'finance', 'admin'], trade: ['trader', 'operator', 'admin'],
		               billing: ['trader', 'operator', 'finance', 'admin']};
		const bad = [];
		// 1366: a laptop, where the order form has five narrow columns
		for (const width of [1280, 1366, 1920]) {
			const ctx = await browser.newContext({viewport: {width, height: 900}, acceptDownloads: true});
			for (const [role, tok] of roles) {
				const page = await ctx.newPage();
				lastPage = page;
				page.errors = [];
				page.on('pageerror', e => page.errors.push(e.message));
				await page.goto(`${URL_}/web/market.html`);
				await signIn(page, tok);
				for (const [name, who] of Object.entries(pages)) {
					if (!who.includes(role))
						continue;
					await page.goto(`${URL_}/web/${name}.html${name === 'market' ? '?market=spot' : ''}`);
					await page.waitForSelector('#signout', {timeout: WAIT});
					// the lists are in when their rows are
					await page.waitForFunction(() => [...document.querySelectorAll('tbody')].every(b => b.rows.length > 0 || !b.closest('table').id || b.closest('#lines')),
					                           null, {timeout: WAIT}).catch(() => {});
					await new Promise(r => setTimeout(r, 400));
					const over = [...await page.evaluate(overflowing), ...await page.evaluate(cutRows), ...await page.evaluate(brokenNames)];
					for (const o of over)
						bad.push(`${name} as ${role} at ${width}px: ${o}`);
					await page.screenshot({path: join(OUT, `${name}-${role}-${width}.png`), fullPage: true});
				}
				noErrors(page, `pages as ${role}`);
				await page.close();
			}
			await ctx.close();
		}
		assert(!bad.length, `${bad.length} boxes overflow: ${bad.slice(0, 40).join('; ')}`);
	});

	// A phone (390 x 844): a wide table may scroll inside its box, but the
	// page does not scroll sideways and no panel holds more than its
	// width (the billing chart ran over the summary beside it, and a
	// 400 px grid column pushed the market and billing pages 25 px wide).
	await test('every page at 390 px (a phone): no sideways page, no panel wider than itself', async () => {
		const bad = [];
		const ctx = await browser.newContext({viewport: {width: 390, height: 844}});
		for (const [role, tok, names] of [['finance', W.finance, ['market', 'billing']], ['trader', W.trader, ['trade']]]) {
			const page = await ctx.newPage();
			lastPage = page;
			page.errors = [];
			page.on('pageerror', e => page.errors.push(e.message));
			await page.goto(`${URL_}/web/market.html`);
			await signIn(page, tok);
			for (const name of ['index', ...names]) {
				await page.goto(name === 'index' ? `${URL_}/` : `${URL_}/web/${name}.html`);
				if (name !== 'index')
					await page.waitForSelector('#signout', {timeout: WAIT});
				await new Promise(r => setTimeout(r, 1500)); // the charts are drawn
				const over = await page.evaluate(() => {
					const out = [];
					const d = document.documentElement;
					if (d.scrollWidth > d.clientWidth + 1)
						out.push(`the page scrolls sideways (${d.scrollWidth} > ${d.clientWidth} px)`);
					for (const p of document.querySelectorAll('section.panel, ul.cards li'))
						if (p.offsetParent && p.scrollWidth > p.clientWidth + 1)
							out.push(`panel "${(p.querySelector('h2, a') || p).textContent.trim().slice(0, 30)}" holds ${p.scrollWidth} px in ${p.clientWidth}`);
					// a total row is one band: its figures' cells too
					for (const f of document.querySelectorAll('tfoot tr')) {
						const bg = new Set([...f.cells].map(c => getComputedStyle(c).backgroundColor));
						if (f.cells.length && bg.size > 1)
							out.push(`the total row of #${f.closest('table').id} has ${bg.size} backgrounds`);
					}
					return out;
				});
				for (const o of over)
					bad.push(`${name} as ${role}: ${o}`);
				await page.screenshot({path: join(OUT, `${name}-${role}-390.png`), fullPage: true});
			}
			noErrors(page, `pages as ${role} at 390 px`);
			await page.close();
		}
		await ctx.close();
		assert(!bad.length, bad.join('; '));
	});

	// A phone, what the test above lets pass: the header, signed out and
	// in as each role, holds its links and buttons on one line each ("Sign
	// out" broke in two); the billing summary shows every figure without
	// a sideways scroll (its revenue and credits sat behind one, unsaid);
	// the trader's and the operator's pages too (a team's long name in
	// the billing page's first line pushed it sideways).
	await test('every page at 390 px, signed out and as each role: the header\'s buttons on one line, no words past the edge, the billing summary with no hidden column', async () => {
		const bad = [];
		const ctx = await browser.newContext({viewport: {width: 390, height: 844}});
		const page = await ctx.newPage();
		lastPage = page;
		page.errors = [];
		page.on('pageerror', e => page.errors.push(e.message));
		const look = async (name, who) => {
			await page.goto(name === 'index' ? `${URL_}/` : `${URL_}/web/${name}.html`);
			await page.waitForSelector(name === 'index' ? 'header.top' : who === 'signed-out' ? '#token' : '#signout', {timeout: WAIT});
			if (name === 'billing' && who !== 'signed-out')
				await page.waitForFunction(() => document.querySelector('#summary tfoot tr'), null, {timeout: WAIT});
			for (const o of await page.evaluate(phoneUnreadable))
				bad.push(`${name} ${who === 'signed-out' ? 'signed out' : `as ${who}`}: ${o}`);
			await page.screenshot({path: join(OUT, `phone-${name}-${who}-390.png`)});
		};
		for (const name of ['index', 'market', 'trade', 'billing'])
			await look(name, 'signed-out');
		const pages = {finance: ['market', 'billing'], trader: ['market', 'trade', 'billing'],
		               operator: ['market', 'trade', 'billing'], admin: ['market', 'trade', 'billing']};
		for (const [role, tok] of [['finance', W.finance], ['trader', W.trader], ['operator', W.operator], ['admin', ADMIN]]) {
			await page.goto(`${URL_}/web/market.html`);
			await page.evaluate(() => sessionStorage.clear());
			await page.reload();
			await signIn(page, tok);
			for (const name of pages[role])
				await look(name, role);
		}
		// the summary as cards, with the figures to the nanodollar (wider)
		await page.check('#b-exact');
		await new Promise(r => setTimeout(r, 300));
		for (const o of await page.evaluate(phoneUnreadable))
			bad.push(`billing, exact amounts: ${o}`);
		await page.screenshot({path: join(OUT, 'phone-billing-exact-390.png'), fullPage: true});
		noErrors(page, 'pages at 390 px');
		await ctx.close();
		assert(!bad.length, bad.join('; '));
	});
}

// Runs in the page at a phone's width: a header wider than the window or
// with a link or button broken over two lines, and a billing summary whose
// table is wider than its box (columns behind a sideways scroll) or whose
// figure leaves its card.
function phoneUnreadable()
{
	const out = [];
	const lines = e => {
		const r = document.createRange();
		r.selectNodeContents(e);
		return new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))).size;
	};
	const head = document.querySelector('header.top');
	if (head.scrollWidth > head.clientWidth + 1)
		out.push(`the header holds ${head.scrollWidth} px in ${head.clientWidth}`);
	for (const e of head.querySelectorAll('a, button, label')) {
		if (!e.offsetParent)
			continue;
		const n = lines(e);
		if (n > 1)
			out.push(`"${e.textContent.trim()}" in the header is on ${n} lines`);
		const b = e.getBoundingClientRect();
		if (b.right > window.innerWidth + 1 || b.left < -1)
			out.push(`"${e.textContent.trim()}" in the header is outside the window (${Math.round(b.left)}-${Math.round(b.right)} px)`);
	}
	// and no words past the window's edge (an operator's 63-character
	// name ran off the billing page's first line)
	if (document.documentElement.scrollWidth > document.documentElement.clientWidth + 1)
		out.push(`the page scrolls sideways (${document.documentElement.scrollWidth} > ${document.documentElement.clientWidth} px)`);
	for (const e of document.querySelectorAll('main p, main .hint, main h1, main h2, #banner'))
		if (e.offsetParent && !e.closest('.scroll') && e.scrollWidth > e.clientWidth + 1)
			out.push(`"${e.textContent.trim().slice(0, 40)}" holds ${e.scrollWidth} px in ${e.clientWidth}`);
	const t = document.querySelector('#summary');
	if (t && t.offsetParent) {
		const box = t.closest('.scroll');
		const edge = box.getBoundingClientRect();
		const cut = [...t.querySelectorAll('tbody td, tfoot td, tfoot th')].filter(c => {
			const b = c.getBoundingClientRect();
			return c.offsetParent && b.width && (b.right > edge.right + 1 || c.scrollWidth > c.clientWidth + 1);
		});
		if (box.scrollWidth > box.clientWidth + 1)
			out.push(`the summary holds ${box.scrollWidth} px in ${box.clientWidth}: columns are behind a sideways scroll`);
		else if (cut.length)
			out.push(`the summary's "${cut[0].textContent.trim().slice(0, 30)}" and ${cut.length - 1} more are cut at its box's edge`);
	}
	return out;
}

// Runs in the page: every element whose content is wider than its box
// (cells, labels, headings, buttons, hints, the scrolling table boxes,
// whose hidden columns a person would have to scroll to), and every SVG
// text outside its svg. Described as "what: text (content > box px)".
function overflowing()
{
	const out = [];
	const name = e => `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}${e.closest('table[id]') ? ` in #${e.closest('table[id]').id}` : ''}`;
	const sel = 'th, td, label, h1, h2, button, .hint, select, .scroll, #whoami, #market-info, .toolbar > *, .field, .inline';
	for (const e of document.querySelectorAll(sel)) {
		if (!e.offsetParent)
			continue; // not shown
		if (e.scrollWidth > e.clientWidth + 1)
			out.push(`${name(e)}: "${e.textContent.trim().slice(0, 40)}" (${e.scrollWidth} > ${e.clientWidth} px)`);
	}
	for (const t of document.querySelectorAll('svg text')) {
		const svg = t.ownerSVGElement.getBoundingClientRect(), b = t.getBoundingClientRect();
		if (b.width && (b.left < svg.left - 1 || b.right > svg.right + 1 || b.top < svg.top - 1 || b.bottom > svg.bottom + 1))
			out.push(`svg text "${t.textContent}" outside its svg`);
	}
	// a radio button or checkbox stays beside its words (a rule for the
	// text fields once stretched them across the column)
	for (const b of document.querySelectorAll('label input[type="radio"], label input[type="checkbox"]')) {
		if (b.offsetParent && b.getBoundingClientRect().width > 30)
			out.push(`${name(b.closest('label'))}: its ${b.type} is ${Math.round(b.getBoundingClientRect().width)} px wide, away from its words`);
	}
	if (document.documentElement.scrollWidth > document.documentElement.clientWidth + 1)
		out.push(`the page scrolls sideways (${document.documentElement.scrollWidth} > ${document.documentElement.clientWidth} px)`);
	return out;
}

// Runs in the page: each "placed by" cell whose name ("agent of NODE",
// "PERSON (role)") is broken over two lines: the words around it may
// wrap, the name not ("web-a-" / "mxcd" broke at the hyphen).
function brokenNames()
{
	return [...document.querySelectorAll('td.who .name')].filter(span => {
		const r = document.createRange();
		r.selectNodeContents(span);
		return new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))).size > 1;
	}).map(span => `"${span.closest('td').textContent}" broken over lines in #${span.closest('table').id}`);
}

// Runs in the page: each scrolling list (.scroll) whose box cuts a row
// at its bottom edge, at the top of the list and scrolled to its end
// (where the last row must be whole). Leaves the lists at their top.
function cutRows()
{
	const out = [];
	for (const box of document.querySelectorAll('.scroll')) {
		if (!box.offsetParent || box.scrollHeight <= box.clientHeight)
			continue;
		const id = (box.querySelector('table[id]') || {}).id;
		for (const end of [false, true]) {
			box.scrollTop = end ? box.scrollHeight : 0;
			// the visible bottom of the box (a horizontal scroll bar is not)
			const edge = box.getBoundingClientRect().top + box.clientTop + box.clientHeight;
			const rows = [...box.querySelectorAll('tbody tr')].filter(r => !r.hidden);
			for (const r of rows) {
				const b = r.getBoundingClientRect();
				if (b.top < edge - 1 && b.bottom > edge + 1)
					out.push(`#${id}${end ? ' scrolled to its end' : ''}: row "${r.textContent.trim().slice(0, 30)}" cut at the box's edge (${b.top.toFixed(1)}-${b.bottom.toFixed(1)}, edge ${edge.toFixed(1)})`);
			}
			if (end && rows.length && rows[rows.length - 1].getBoundingClientRect().bottom > edge + 1)
				out.push(`#${id}: the last row ends below the box's edge when scrolled to the end`);
		}
		box.scrollTop = 0;
	}
	return out;
}

async function signedGet(node, path)
{
	const r = await signed(node, 'GET', path, '');
	return JSON.parse(r.text);
}

// A node agent's signed request (common/sign.h); `text` is the exact body.
async function signed(node, method, path, text)
{
	const ts = Math.floor(Date.now() / 1000);
	const nonce = randomBytes(16).toString('hex');
	const bodyHash = createHash('sha256').update(text).digest('hex');
	// the canonical request: the path and the query as sent, split at the first '?'
	const q = path.indexOf('?');
	const [p, query] = q < 0 ? [path, ''] : [path.slice(0, q), path.slice(q + 1)];
	const msg = `RAMEX-HMAC-SHA256-2\n${method}\n${p}\n${query}\n${ts}\n${nonce}\n${bodyHash}`;
	const sig = createHmac('sha256', node.secret).update(msg).digest('hex');
	const res = await fetch(URL_ + path, {
		method,
		headers: {
			'Content-Type': 'application/json', 'X-Ramex-Key': node.key_id, 'X-Ramex-Timestamp': String(ts),
			'X-Ramex-Nonce': nonce, 'X-Ramex-Signature': sig
		},
		body: method === 'GET' ? undefined : text
	});
	return {status: res.status, text: await res.text()};
}

try {
	await buildWorld();
	browser = await chromium.launch({
		executablePath: '/usr/bin/chromium',
		headless: true,
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
		       '--disable-background-networking', '--disable-component-update', '--disable-sync']
	});
	context = await browser.newContext({viewport: {width: 1366, height: 768}, acceptDownloads: true});
	await main();
} catch (e) {
	failed++;
	console.log(`not ok setup: ${e.message}`);
} finally {
	if (agent)
		agent.kill('SIGTERM');
	if (browser)
		await browser.close().catch(() => {});
	writeFileSync(join(OUT, 'console.log'), consoleLog.join('\n') + '\n');
	console.log(`${passed} passed, ${failed} failed`);
}
