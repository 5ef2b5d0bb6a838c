// fmt.js — the text forms of ramex's units in the browser, and the exact
// parsing of what a person types into an order form.
//
// Money arrives as integer nanodollars (n$), prices as n$ per page-year and
// quantities as whole 4096-byte pages (docs/money.md). Everything here works
// in BigInt so that no amount passes through floating point: a JSON number
// above 2^53 has already lost its last digits before we see it, but every
// figure below that is shown exactly as common/money.c would show it
// (cents rounded half away from zero). Pure: no DOM, no fetch, so node can
// test it (tests/browser/fmt_test.mjs).

export const PAGE_SIZE = 4096n;
export const PAGES_PER_GIB = 262144n; // 2^30 / 4096
export const PAGES_PER_MIB = 256n;
export const NS_PER_DOLLAR = 1000000000n;
export const NS_PER_CENT = 10000000n;
export const SECONDS_PER_YEAR = 31536000n;

// An integer from the API (number, bigint or decimal string) as a BigInt.
export function big(v)
{
	if (typeof v === 'bigint')
		return v;
	if (typeof v === 'number') {
		if (!Number.isFinite(v))
			throw new RangeError(`not a finite number: ${v}`);
		return BigInt(Math.trunc(v));
	}
	if (typeof v === 'string' && /^-?[0-9]+$/.test(v))
		return BigInt(v);
	throw new TypeError(`not an integer: ${JSON.stringify(v)}`);
}

function abs(x)
{
	return x < 0n ? -x : x;
}

// "1234567" -> "1,234,567"
export function groupDigits(s)
{
	return s.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// n / d rounded to the nearest integer, halves away from zero (d > 0).
function roundDiv(n, d)
{
	const q = (abs(n) * 2n + d) / (2n * d);
	return n < 0n ? -q : q;
}

// A count of hundredths as "[-]1,234.56".
function hundredths(h)
{
	const sign = h < 0n ? '-' : '';
	const a = abs(h);
	const whole = groupDigits((a / 100n).toString());
	const frac = (a % 100n).toString().padStart(2, '0');
	return `${sign}${whole}.${frac}`;
}

// 104857600000 -> "$104.86"; -3e9 -> "-$3.00". Cents, halves away from
// zero, like money_format_cents.
export function money(ns)
{
	const c = roundDiv(big(ns), NS_PER_CENT);
	const s = hundredths(c);
	return s.startsWith('-') ? `-$${s.slice(1)}` : `$${s}`;
}

// 104857600000 -> "104.857600000": the exact figure, for tooltips and CSV.
export function moneyExact(ns)
{
	const v = big(ns);
	const a = abs(v);
	const frac = (a % NS_PER_DOLLAR).toString().padStart(9, '0');
	return `${v < 0n ? '-' : ''}${a / NS_PER_DOLLAR}.${frac}`;
}

// An amount a person can read at any size: to the cent from a cent up
// (money), under a cent to two significant digits, halves away from zero
// ("$0.0041", "$0.00000012"), so a small line is not "$0.00"; exactly to
// the nanodollar when `exact` ("$0.004123456"), where every column adds up
// to the last digit. Totals are always sums of exact amounts.
export function amount(ns, exact = false)
{
	const v = big(ns);
	if (exact)
		return v < 0n ? `-$${moneyExact(-v)}` : `$${moneyExact(v)}`;
	const a = abs(v);
	if (a === 0n || a >= NS_PER_CENT)
		return money(v);
	// a < 10^7: keep two significant digits of 9 decimals
	const digits = a.toString().length;      // 1..7
	const drop = BigInt(10) ** BigInt(digits - 2 > 0 ? digits - 2 : 0);
	let r = roundDiv(a, drop) * drop;         // may round up to 10^digits
	if (r >= NS_PER_CENT)
		return money(v);
	const frac = r.toString().padStart(9, '0').replace(/0+$/, '');
	return `${v < 0n ? '-' : ''}$0.${frac}`;
}

// A price in n$/page-year as dollars with as many decimals as it needs
// (at least two, at most nine): 100000 -> "$0.0001", 15000 -> "$0.000015".
export function price(ns)
{
	const v = big(ns);
	const a = abs(v);
	let frac = (a % NS_PER_DOLLAR).toString().padStart(9, '0');
	frac = frac.replace(/0+$/, '');
	if (frac.length < 2)
		frac = frac.padEnd(2, '0');
	const whole = groupDigits((a / NS_PER_DOLLAR).toString());
	return `${v < 0n ? '-' : ''}$${whole}.${frac}`;
}

// The same price per GiB-year, what a person compares with a cloud bill,
// to $0.0001: two prices one n$/page-year apart (the finest step a market
// can have) are 262,144 n$ = $0.000262144 apart per GiB-year, more than one
// step of $0.0001, so two different prices never read the same (to the
// cent, 38 neighbouring prices did). Halves away from zero.
// 100000 n$/page-year -> "$26.2144"; 1 -> "$0.0003".
export const GIB_PRICE_DECIMALS = 4;
const GIB_PRICE_STEP = 10n ** BigInt(9 - GIB_PRICE_DECIMALS); // n$
export function pricePerGiB(ns)
{
	const q = roundDiv(big(ns) * PAGES_PER_GIB, GIB_PRICE_STEP);
	const a = abs(q), one = 10n ** BigInt(GIB_PRICE_DECIMALS);
	const frac = (a % one).toString().padStart(GIB_PRICE_DECIMALS, '0');
	return `${q < 0n ? '-' : ''}$${groupDigits((a / one).toString())}.${frac}`;
}

// 1048576 -> "1,048,576"
export function pages(p)
{
	return groupDigits(big(p).toString());
}

// Pages as binary bytes: GiB to two decimals from 0.01 GiB up, then MiB,
// then whole KiB (a few pages would otherwise read "0.00 GiB").
export function bytes(p)
{
	const v = big(p);
	if (abs(v) >= PAGES_PER_GIB / 100n)
		return `${hundredths(roundDiv(v * 100n, PAGES_PER_GIB))} GiB`;
	if (abs(v) >= PAGES_PER_MIB)
		return `${hundredths(roundDiv(v * 100n, PAGES_PER_MIB))} MiB`;
	return `${groupDigits((v * PAGE_SIZE / 1024n).toString())} KiB`;
}

// "1,048,576 pages (4.00 GiB)"
export function pagesAndBytes(p)
{
	const n = big(p);
	return `${pages(n)} ${abs(n) === 1n ? 'page' : 'pages'} (${bytes(n)})`;
}

// Page-seconds as page-years to two decimals: 33067950784512000 -> ...
export function pageYears(ps)
{
	return hundredths(roundDiv(big(ps) * 100n, SECONDS_PER_YEAR));
}

// "2026-12-03 09:24:16 UTC" from an RFC 3339 string, epoch nanoseconds
// (BigInt, string or number) or a Date.
export function time(t)
{
	let d;
	if (t instanceof Date)
		d = t;
	else if (typeof t === 'string' && !/^-?[0-9]+$/.test(t))
		d = new Date(t);
	else
		d = new Date(Number(big(t) / 1000000n));
	if (Number.isNaN(d.getTime()))
		return String(t);
	return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

// The same instant for a table cell: "12-06 19:06:13" (UTC, no year and
// no zone, which the column header and the cell's tooltip, time(t), give).
export function shortTime(t)
{
	const full = time(t);
	const m = /^\d{4}-(\d\d-\d\d \d\d:\d\d:\d\d) UTC$/.exec(full);
	return m ? m[1] : full;
}

// ---- parsing what a person types ----
//
// Each parser returns {ok: true, value} or {ok: false, error} with a sentence
// that says what is wrong and how to fix it; the forms show it beside the
// field. Nothing is rounded: an input that does not name an exact value is
// refused.

// A decimal with at most `maxDecimals` decimals, scaled by 10^maxDecimals.
function scaled(s, maxDecimals, what)
{
	const t = String(s).trim().replace(/^\$/, '');
	if (t === '')
		return {ok: false, error: `enter ${what}`};
	const m = /^([0-9]+)(?:\.([0-9]+))?$/.exec(t.replace(/,/g, ''));
	if (!m)
		return {
			ok: false,
			error: `${what} must be a plain decimal number such as 0.0001`
		};
	const frac = m[2] || '';
	if (frac.length > maxDecimals)
		return {
			ok: false,
			error: `${what} has more than ${maxDecimals} decimals`
		};
	const v = BigInt(m[1] + frac.padEnd(maxDecimals, '0'));
	return {ok: true, value: v};
}

// Dollars per page-year ("0.0001") -> n$ per page-year (100000n).
export function parsePrice(s)
{
	const r = scaled(s, 9, 'the price in $ per page-year');
	if (!r.ok)
		return r;
	if (r.value <= 0n)
		return {ok: false, error: 'the price must be above zero'};
	return r;
}

// What market `m` (GET /v1/markets) says of an order's pages and price
// (BigInt, or null when not typed yet): {pages, price}, each '' when the
// market takes it, else why, in a person's units. The order form checks
// it before sending: the exchange would refuse the order anyway, and a
// price past 64 bits of n$ came back as the JSON parser's words.
export function marketCheck(m, p, pr)
{
	const out = {pages: '', price: ''};
	if (!m)
		return out;
	const lot = big(m.lot), lo = big(m.min_pages), hi = big(m.max_pages);
	if (p !== null && (p < lo || p > hi))
		out.pages = `${m.name} takes ${pages(lo)} to ${pagesAndBytes(hi)}`;
	else if (p !== null && p % lot !== 0n)
		out.pages = `${m.name} takes whole lots of ${pages(lot)} pages: ` +
		            `${pages(p / lot * lot || lot)} or ${pages((p / lot + 1n) * lot)}`;
	const tick = big(m.tick), pmin = big(m.price_min), pmax = big(m.price_max);
	if (pr !== null && (pr < pmin || pr > pmax))
		out.price = `${m.name} takes ${price(pmin)} to ${price(pmax)} per page-year`;
	else if (pr !== null && pr % tick !== 0n)
		out.price = `${m.name} takes prices in steps of ${price(tick)}`;
	return out;
}

// A quantity in `unit` ('pages' or 'GiB') -> whole pages.
export function parseQuantity(s, unit)
{
	if (unit === 'pages') {
		const t = String(s).trim().replace(/,/g, '');
		if (t === '')
			return {ok: false, error: 'enter a number of pages'};
		if (!/^[0-9]+$/.test(t))
			return {
				ok: false,
				error: 'pages must be a whole number such as 262144'
			};
		const v = BigInt(t);
		if (v <= 0n)
			return {ok: false, error: 'the quantity must be above zero'};
		return {ok: true, value: v};
	}
	if (unit !== 'GiB')
		return {ok: false, error: `unknown unit ${unit}`};
	const r = scaled(s, 6, 'the quantity in GiB');
	if (!r.ok)
		return r;
	const scaledPages = r.value * PAGES_PER_GIB; // pages * 10^6
	if (scaledPages % 1000000n !== 0n) {
		const lo = scaledPages / 1000000n;
		return {
			ok: false,
			error: `${String(s).trim()} GiB is not a whole number of ` +
			           `pages; use ${groupDigits(lo.toString())} or ` +
			           `${groupDigits((lo + 1n).toString())} pages`
		};
	}
	const v = scaledPages / 1000000n;
	if (v <= 0n)
		return {ok: false, error: 'the quantity must be above zero'};
	return {ok: true, value: v};
}
