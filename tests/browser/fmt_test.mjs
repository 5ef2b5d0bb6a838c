// fmt_test.mjs — web/js/fmt.js against the brief's worked examples and the
// rules of common/money.c (cents rounded half away from zero). Run by
// suite.sh with `node --test`; needs nothing but node.
import assert from 'node:assert/strict';
import {test} from 'node:test';

import {readFileSync} from 'node:fs';

import * as fmt from '../../web/js/fmt.js';

test('brief worked examples to the cent', () => {
	// 4 GiB offline for a year at 1/100 cent per page-year
	assert.equal(fmt.money(104857600000), '$104.86');
	assert.equal(fmt.money(209715200000n), '$209.72');
	assert.equal(fmt.money('157286400000'), '$157.29');
});

test('cents round half away from zero, with a sign', () => {
	assert.equal(fmt.money(5000000), '$0.01');   // exactly half a cent
	assert.equal(fmt.money(4999999), '$0.00');
	assert.equal(fmt.money(-5000000), '-$0.01'); // away from zero
	assert.equal(fmt.money(-4999999), '$0.00');
	assert.equal(fmt.money(-3000000000), '-$3.00');
	assert.equal(fmt.money(0), '$0.00');
});

test('large amounts keep every digit and group thousands', () => {
	// above 2^53 n$ only BigInt or a string keeps the digits
	assert.equal(fmt.money(9223372036854775807n), '$9,223,372,036.85');
	assert.equal(fmt.money('-9223372036854775808'), '-$9,223,372,036.85');
	assert.equal(fmt.moneyExact(104857600000), '104.857600000');
	assert.equal(fmt.moneyExact(-1), '-0.000000001');
});

test('prices show the decimals they need', () => {
	assert.equal(fmt.price(100000), '$0.0001');
	assert.equal(fmt.price(15000), '$0.000015');
	assert.equal(fmt.price(1), '$0.000000001');
	assert.equal(fmt.price(2000000000), '$2.00');
	assert.equal(fmt.pricePerGiB(100000), '$26.2144');
	assert.equal(fmt.pricePerGiB(200000), '$52.4288');
	assert.equal(fmt.pricePerGiB(1), '$0.0003');
	assert.equal(fmt.pricePerGiB(-100000), '-$26.2144');
	assert.equal(fmt.pricePerGiB('9223372036854775807'), '$2,417,851,639,229,258.3492');
});

// A book's neighbouring prices, one n$/page-year apart, at every size:
// per GiB-year they never read the same (to the cent, 26.21 stood for 38
// different prices), and the order of the text is the order of the prices.
test('two different prices never read the same per GiB-year', () => {
	const num = t => Number(t.replace(/[$,]/g, ''));
	for (const base of [1n, 99999n, 100000n, 38146n, 10n ** 12n, 9223372036854775000n]) {
		let prev = fmt.pricePerGiB(base);
		for (let p = base + 1n; p < base + 2000n; p++) {
			const t = fmt.pricePerGiB(p);
			assert.notEqual(t, prev, `${p - 1n} and ${p} n$/page-year both read ${t}`);
			if (base < 10n ** 12n)
				assert.ok(num(t) > num(prev), `${t} after ${prev}`);
			prev = t;
		}
	}
});

test('pages as GiB, then MiB, then KiB', () => {
	assert.equal(fmt.bytes(1048576), '4.00 GiB');
	assert.equal(fmt.bytes(2097152), '8.00 GiB');
	assert.equal(fmt.bytes(131072), '0.50 GiB');
	assert.equal(fmt.bytes(256), '1.00 MiB');
	assert.equal(fmt.bytes(1), '4 KiB');
	assert.equal(fmt.bytes(255), '1,020 KiB');
	assert.equal(fmt.pagesAndBytes(1048576), '1,048,576 pages (4.00 GiB)');
	assert.equal(fmt.pagesAndBytes(1), '1 page (4 KiB)');
});

test('page-seconds as page-years', () => {
	assert.equal(fmt.pageYears(31536000n * 1048576n), '1,048,576.00');
	assert.equal(fmt.pageYears(15768000), '0.50');
});

test('times in UTC', () => {
	assert.equal(fmt.time('2026-12-03T09:24:16.5Z'), '2026-12-03 09:24:16 UTC');
	assert.equal(fmt.time(1796290000000000000n), '2026-12-03 09:26:40 UTC');
	assert.equal(fmt.time('not a time'), 'not a time');
	assert.equal(fmt.shortTime(1796290000000000000n), '12-03 09:26:40');
	assert.equal(fmt.shortTime('not a time'), 'not a time');
});

test('price input is exact or refused with a reason', () => {
	assert.deepEqual(fmt.parsePrice('0.0001'), {ok: true, value: 100000n});
	assert.deepEqual(fmt.parsePrice('$0.000015'), {ok: true, value: 15000n});
	assert.deepEqual(fmt.parsePrice('2'), {ok: true, value: 2000000000n});
	assert.match(fmt.parsePrice('0.0000000001').error, /more than 9 decimals/);
	assert.match(fmt.parsePrice('1e-4').error, /plain decimal/);
	assert.match(fmt.parsePrice('-1').error, /plain decimal/);
	assert.match(fmt.parsePrice('0').error, /above zero/);
	assert.match(fmt.parsePrice('').error, /enter the price/);
});

test('quantity input in pages or whole-page GiB', () => {
	assert.deepEqual(fmt.parseQuantity('262,144', 'pages'),
	                 {ok: true, value: 262144n});
	assert.deepEqual(fmt.parseQuantity('4', 'GiB'), {ok: true, value: 1048576n});
	assert.deepEqual(fmt.parseQuantity('0.5', 'GiB'), {ok: true, value: 131072n});
	const r = fmt.parseQuantity('0.1', 'GiB');
	assert.equal(r.ok, false);
	assert.match(r.error, /not a whole number of pages; use 26,214 or 26,215/);
	assert.match(fmt.parseQuantity('1.5', 'pages').error, /whole number/);
	assert.match(fmt.parseQuantity('0', 'pages').error, /above zero/);
	assert.match(fmt.parseQuantity('x', 'GiB').error, /plain decimal/);
});

test('amount: cents from a cent up, two significant digits under it, exact on request', () => {
	assert.equal(fmt.amount(104857600000n), '$104.86');
	assert.equal(fmt.amount(10000000n), '$0.01');
	assert.equal(fmt.amount(0n), '$0.00');
	assert.equal(fmt.amount(4123456n), '$0.0041');
	assert.equal(fmt.amount(4150000n), '$0.0042');   // halves away from zero
	assert.equal(fmt.amount(-4150000n), '-$0.0042');
	assert.equal(fmt.amount(123n), '$0.00000012');
	assert.equal(fmt.amount(7n), '$0.000000007');
	assert.equal(fmt.amount(9960000n), '$0.01');     // rounds up into cents
	assert.equal(fmt.amount(4123456n, true), '$0.004123456');
	assert.equal(fmt.amount(-104857600000n, true), '-$104.857600000');
});

// The table ramexctl is checked against too (test_ramexctl_units): one
// rounding rule for the web and the command line.
test('the same text as ramexctl: tests/unit/fixtures/units.tsv', () => {
	const url = new URL('../unit/fixtures/units.tsv', import.meta.url);
	const fns = {money: fmt.money, price: fmt.price, bytes: fmt.bytes, amount: v => fmt.amount(v),
	             amount_exact: v => fmt.amount(v, true)};
	let n = 0;
	for (const line of readFileSync(url, 'utf8').split('\n')) {
		if (!line || line.startsWith('#'))
			continue;
		const [fn, v, want] = line.split('\t');
		assert.ok(fns[fn], `unknown function ${fn}`);
		assert.equal(fns[fn](BigInt(v)), want, `${fn}(${v})`);
		n++;
	}
	assert.ok(n >= 30, `${n} lines`);
});

test('an order is checked against its market before it is sent', () => {
	const m = {name: 'spot', tick: 100, lot: 256, min_pages: 256, max_pages: 1073741824,
	           price_min: 0, price_max: 10000000};
	assert.deepEqual(fmt.marketCheck(m, 512n, 100000n), {pages: '', price: ''});
	assert.deepEqual(fmt.marketCheck(m, null, null), {pages: '', price: ''});
	// $99,999,999,999 per page-year: past 64 bits of n$, and far above the market
	const huge = fmt.parsePrice('99999999999');
	assert.ok(huge.ok);
	assert.equal(fmt.marketCheck(m, 256n, huge.value).price,
	             'spot takes $0.00 to $0.01 per page-year');
	assert.equal(fmt.marketCheck(m, 256n, 100050n).price, 'spot takes prices in steps of $0.0000001');
	assert.equal(fmt.marketCheck(m, 257n, 100000n).pages, 'spot takes whole lots of 256 pages: 256 or 512');
	assert.equal(fmt.marketCheck(m, 1n << 40n, 100000n).pages,
	             'spot takes 256 to 1,073,741,824 pages (4,096.00 GiB)');
	assert.equal(fmt.marketCheck(m, 128n, 100000n).pages,
	             'spot takes 256 to 1,073,741,824 pages (4,096.00 GiB)');
});
