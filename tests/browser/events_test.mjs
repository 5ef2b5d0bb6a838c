// events_test.mjs — the SSE parser of web/js/events.js against the wire
// format ramexd writes (exchange/events.c): ids, event names, comments,
// keep-alives, retry, CRLF, and events cut across chunks.
import assert from 'node:assert/strict';
import {test} from 'node:test';

import {openEvents, parseSSE, silentLimitMs} from '../../web/js/events.js';

test('events with ids and JSON data, comments skipped', () => {
	const [evs, rest] = parseSSE('retry: 2000\n: ramex events\n\n' +
	                             'id: 7\nevent: fill\ndata: {"trade_id":3}\n\n' +
	                             ': keep-alive\n\n');
	assert.equal(rest, '');
	assert.equal(evs.length, 2);
	assert.equal(evs[0].retry, 2000);
	assert.deepEqual([evs[1].id, evs[1].event, evs[1].data], ['7', 'fill', '{"trade_id":3}']);
});

test('an event cut across chunks waits for its end', () => {
	let [evs, rest] = parseSSE('id: 8\nevent: order\nda');
	assert.equal(evs.length, 0);
	[evs, rest] = parseSSE(rest + 'ta: {"id":1}\n\nid: 9\n');
	assert.equal(evs.length, 1);
	assert.equal(evs[0].data, '{"id":1}');
	assert.equal(rest, 'id: 9\n');
});

test('CRLF line ends, several data lines, default event name', () => {
	const [evs] = parseSSE('data: a\r\ndata: b\r\n\r\nevent: overflow\ndata:{"lost":2}\n\n');
	assert.equal(evs[0].event, 'message');
	assert.equal(evs[0].data, 'a\nb');
	assert.equal(evs[1].event, 'overflow');
	assert.equal(evs[1].data, '{"lost":2}');
});

// An exchange that answers, says its keep-alive interval, then sends
// nothing more with the connection open (kill -STOP): the stream must not
// stay "live"; after two missed beats it is down and reconnects.
function frozenExchange(hello)
{
	const calls = [];
	const fetchFn = (url, init) => {
		calls.push(url);
		const enc = new TextEncoder();
		const body = new ReadableStream({
			start(c)
			{
				c.enqueue(enc.encode(hello));
				init.signal.addEventListener('abort', () =>
					c.error(new DOMException('aborted', 'AbortError')));
			}
		});
		return Promise.resolve(new Response(body, {status: 200}));
	};
	return {calls, fetchFn};
}

test('a silent stream is said to be down after two missed keep-alives', async () => {
	const {calls, fetchFn} = frozenExchange('retry: 2000\n: ramex events, keep-alive every 1 s\n\n');
	const states = [];
	let sawDown;
	const down = new Promise(r => (sawDown = r));
	const s = openEvents(() => {}, (st, detail) => {
		states.push([st, detail]);
		if (st === 'down')
			sawDown(detail);
	}, {fetch: fetchFn, token: () => 'tok', keepalive: 1});
	const detail = await down;
	s.stop();
	assert.deepEqual(states.slice(0, 2).map(x => x[0]), ['connecting', 'live']);
	assert.match(detail, /^no word from the exchange for 3 s; reconnecting in 2 s$/);
	assert.equal(calls[0], '/v1/events?keepalive_s=1');
});

test('the silence allowed is two intervals and a second', () => {
	assert.equal(silentLimitMs(5), 11000);
	assert.equal(silentLimitMs(15), 31000);
});
