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
//   RAMEX_ADMIN_TOKEN  an admin token (ramexd token create)
//   RAMEX_BROWSER_OUT  where screenshots and the console log go
//   RAMEX_WEB_ROOT     the served tree (build/web), for the static checks

import {createHash, createHmac, randomBytes} from 'node:crypto';
import {readdirSync, readFileSync, writeFileSync} from 'node:fs';
import {createRequire} from 'node:module';
import {join} from 'node:path';

const require = createRequire(import.meta.url);
const {chromium} = require('playwright-core');

const URL_ = process.env.RAMEX_URL;
const ADMIN = process.env.RAMEX_ADMIN_TOKEN;
const OUT = process.env.RAMEX_BROWSER_OUT;
const WEB = process.env.RAMEX_WEB_ROOT;
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

async function buildWorld()
{
	const sfx = Date.now().toString(36);
	W.team = await must(ADMIN, 'POST', '/v1/teams', {name: `web-${sfx}`});
	W.nodeA = await must(ADMIN, 'POST', '/v1/nodes', {name: `web-a-${sfx}`, team_id: W.team.id});
	W.nodeB = await must(ADMIN, 'POST', '/v1/nodes', {name: `web-b-${sfx}`, team_id: W.team.id});
	W.op = await must(ADMIN, 'POST', '/v1/accounts', {name: `web-op-${sfx}`, kind: 'operator'});
	W.trader = (await must(ADMIN, 'POST', '/v1/tokens', {name: `web-trader-${sfx}`, role: 'trader', team_id: W.team.id})).token;
	W.operator = (await must(ADMIN, 'POST', '/v1/tokens', {name: `web-operator-${sfx}`, role: 'operator', account_id: W.op.id})).token;
	W.finance = (await must(ADMIN, 'POST', '/v1/tokens', {name: `web-finance-${sfx}`, role: 'finance'})).token;
	const market = name => ({
		name, tick: 1000, lot: 1, min_pages: 1, max_pages: 1 << 30, price_min: 1000,
		price_max: 1000000000, notice_period_s: 60, breach_penalty: 10000, delivery_deadline_s: 3600
	});
	W.year = new Date().getUTCFullYear() + 1;
	await must(W.operator, 'POST', '/v1/markets', market('spot'));
	await must(W.operator, 'POST', '/v1/markets', market(`perm-${W.year}`));
}

// ---- the browser ----

let browser, context, lastPage = null;

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
		await page.fill('#o-account', String(W.nodeA.account.id));
		await page.selectOption('#o-unit', 'GiB');
		await page.fill('#o-qty', '0.1');
		await page.fill('#o-price', '0.0001');
		await page.press('#o-price', 'Enter');
		const e = await textOf(page, '#o-qty-error');
		assert(/not a whole number of pages; use 26,214 or 26,215/.test(e), `quantity error is "${e}"`);
		assert(await page.evaluate(() => document.activeElement.id) === 'o-qty', 'focus did not move to the wrong field');
		// above the market's price_max ($1 per page-year): the exchange says why
		await page.fill('#o-qty', '1');
		await page.fill('#o-price', '2');
		await page.press('#o-price', 'Enter');
		await page.waitForFunction(() => /refused/.test(document.querySelector('#o-result').textContent), null, {timeout: WAIT});
		const r = await textOf(page, '#o-result');
		assert(/price/i.test(r) && r.length > 40, `the refusal "${r}" does not explain the price`);
		await shot(page, 'trade-refused');
		// the 422 itself logs a "failed to load resource" line: expected here
		page.errors = page.errors.filter(x => !/status of 422/.test(x));
		noErrors(page, 'trade validation');
	});

	await test('trade: a bid is placed, listed as open and shown in the market book', async () => {
		const page = tradePage;
		await page.check('#o-buy');
		await page.selectOption('#o-unit', 'GiB');
		await page.fill('#o-qty', '1');
		await page.fill('#o-price', '0.0001');
		const hint = await textOf(page, '#o-price-hint');
		assert(hint.includes('100,000 n$/page-year') && hint.includes('$26.21 per GiB-year'), `price hint "${hint}"`);
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
		assert(lvl.includes('262,144') && lvl.includes('$26.21'), `book level "${lvl}"`);
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

	await test('trade: cancel the rest of the bid', async () => {
		const page = tradePage;
		await page.click(`#orders tr[data-order="${W.bidId}"] button`);
		await page.waitForSelector(`#orders tr[data-order="${W.bidId}"]`, {state: 'detached', timeout: WAIT});
		assert(/cancelled/.test(await textOf(page, '#banner')), 'no word that the order was cancelled');
		const o = await must(W.trader, 'GET', `/v1/orders/${W.bidId}`);
		assert(o.status === 'cancelled', `the order is ${o.status}`);
		noErrors(page, 'trade cancel');
	});

	await test('market: the perm market shows its term', async () => {
		const page = marketPage;
		await page.selectOption('#market', `perm-${W.year}`);
		await page.waitForFunction(y => /offline until/.test(document.querySelector('#market-info').textContent), W.year, {timeout: WAIT});
		await page.waitForFunction(() => /empty/.test(document.querySelector('#book').textContent), null, {timeout: WAIT});
		await shot(page, 'market-perm');
		noErrors(page, 'market perm');
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
		await page.route('**/v1/events', route => route.abort('connectionreset'));
		await page.goto(`${URL_}/web/market.html?market=spot`);
		await signIn(page, W.trader);
		await page.waitForFunction(() => /reconnecting/.test(document.querySelector('#live-text').textContent), null, {timeout: WAIT});
		await page.unroute('**/v1/events');
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

	await test('market: a finance token is told which role it needs, no request refused', async () => {
		const page = await newPage('market-finance');
		await page.goto(`${URL_}/web/market.html`);
		await signIn(page, W.finance);
		await page.waitForFunction(() => /may not read market data/.test(document.querySelector('#banner').textContent), null, {timeout: WAIT});
		noErrors(page, 'market as finance');
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
		const lines = await page.$$('#lines tbody tr');
		assert(lines.length >= 1 && !/no lines/.test(await textOf(page, '#lines tbody')), 'the invoice shows no lines');
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
		body: text
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
	if (browser)
		await browser.close().catch(() => {});
	writeFileSync(join(OUT, 'console.log'), consoleLog.join('\n') + '\n');
	console.log(`${passed} passed, ${failed} failed`);
}
