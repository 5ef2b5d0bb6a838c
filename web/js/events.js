// events.js — the exchange's event stream (/v1/events, Server-Sent Events)
// read with fetch() instead of EventSource, because the stream needs the
// bearer token in an Authorization header and EventSource cannot send one.
// It parses the SSE wire format itself, remembers the last event id, and
// reconnects with backoff (1 s doubling to 30 s, reset after a good
// connection), sending Last-Event-ID so that what was missed while away is
// replayed while the exchange still holds it. A stream silent for two of
// its keep-alive intervals is taken as dead (the exchange may be frozen with
// the connection open): it is cut, said to be down, and reconnected.

import {token} from './api.js';

// Splits SSE text into events. Returns [events, rest]: rest is an
// incomplete event to keep for the next chunk. Pure, for the tests.
export function parseSSE(buf)
{
	const events = [];
	const norm = buf.replace(/\r\n?/g, '\n');
	const blocks = norm.split('\n\n');
	const rest = blocks.pop();
	for (const block of blocks) {
		const ev = {id: null, event: 'message', data: [], retry: null};
		let any = false;
		for (const line of block.split('\n')) {
			if (line === '' || line.startsWith(':'))
				continue;
			const i = line.indexOf(':');
			const field = i < 0 ? line : line.slice(0, i);
			let value = i < 0 ? '' : line.slice(i + 1);
			if (value.startsWith(' '))
				value = value.slice(1);
			any = true;
			if (field === 'data')
				ev.data.push(value);
			else if (field === 'event')
				ev.event = value;
			else if (field === 'id')
				ev.id = value;
			else if (field === 'retry' && /^[0-9]+$/.test(value))
				ev.retry = Number(value);
		}
		if (any)
			events.push(Object.assign(ev, {data: ev.data.join('\n')}));
	}
	return [events, rest];
}

// The keep-alive interval the pages ask for (GET /v1/events?keepalive_s=),
// and how many of them may pass without a byte before the stream counts as
// dead: a frozen exchange (kill -STOP, a machine that hangs) keeps the TCP
// connection open and sends nothing, which only this silence shows. Two
// missed beats and a second of slack (the exchange's ticker runs once a
// second); 5 s costs the exchange one 14-byte comment per page and 5 s.
export const KEEPALIVE_S = 5;
export const SILENT_BEATS = 2;

// How long a stream with keep-alive interval `ka` seconds may be silent.
export function silentLimitMs(ka)
{
	return (SILENT_BEATS * ka + 1) * 1000;
}

// Opens the stream and keeps it open until stop() is called.
//   onEvent({event, id, data})  data parsed as JSON when it is JSON
//   onState('connecting' | 'live' | 'down', detail)
// opts (for the tests): keepalive (s), fetch, token.
export function openEvents(onEvent, onState, opts = {})
{
	const ask = opts.keepalive || KEEPALIVE_S;
	const get = opts.fetch || ((...a) => fetch(...a));
	const tokenOf = opts.token || token;
	let stopped = false;
	let lastId = null;
	let delay = 1000;
	let ctrl = null;
	let timer = null;
	let watchdog = null;
	let silent = ''; // why the watchdog cut the connection
	let failing = false; // down since the last live: keep saying why

	// (Re)arms the watchdog: no byte for limit ms ends the connection.
	function quiet(limit, why)
	{
		clearTimeout(watchdog);
		watchdog = setTimeout(() => {
			silent = `${why} for ${Math.round(limit / 1000)} s`;
			if (ctrl)
				ctrl.abort();
		}, limit);
	}

	async function connect()
	{
		if (stopped)
			return;
		const t = tokenOf();
		if (!t) {
			onState('down', 'sign in to see live updates');
			return;
		}
		ctrl = new AbortController();
		silent = '';
		if (!failing) // a retry leaves the reason it retries in sight
			onState('connecting', '');
		const h = {Accept: 'text/event-stream', Authorization: `Bearer ${t}`};
		if (lastId !== null)
			h['Last-Event-ID'] = lastId;
		let why = 'the stream ended';
		let limit = silentLimitMs(ask);
		quiet(limit, 'no answer from the exchange');
		try {
			const res = await get(`/v1/events?keepalive_s=${ask}`,
			                      {headers: h, signal: ctrl.signal, cache: 'no-store'});
			if (!res.ok) {
				clearTimeout(watchdog);
				let detail = `the exchange answered ${res.status}`;
				try {
					detail = (await res.json()).detail || detail;
				} catch {
					// not problem+json: keep the status
				}
				why = detail;
				if (res.status === 401 || res.status === 403) {
					onState('down', detail);
					return; // retrying cannot help
				}
			} else {
				failing = false;
				onState('live', '');
				quiet(limit, 'no word from the exchange');
				const started = Date.now();
				const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
				let buf = '';
				for (;;) {
					const {value, done} = await reader.read();
					if (done)
						break;
					// the hello says the interval the exchange keeps
					const ka = /keep-alive every ([0-9]+) s/.exec(value);
					if (ka && Number(ka[1]) > 0)
						limit = silentLimitMs(Number(ka[1]));
					quiet(limit, 'no word from the exchange');
					buf += value;
					const [evs, rest] = parseSSE(buf);
					buf = rest;
					for (const ev of evs) {
						if (ev.id !== null)
							lastId = ev.id;
						if (ev.retry !== null)
							delay = Math.max(1000, ev.retry);
						let data = ev.data;
						try {
							data = JSON.parse(ev.data);
						} catch {
							// plain text data stays text
						}
						onEvent({event: ev.event, id: ev.id, data});
					}
				}
				if (Date.now() - started > 10000)
					delay = 1000;
			}
		} catch (e) {
			if (stopped)
				return;
			why = silent || 'lost the connection to the exchange';
		}
		clearTimeout(watchdog);
		if (stopped)
			return;
		if (silent)
			why = silent;
		failing = true;
		onState('down', `${why}; reconnecting in ${Math.round(delay / 1000)} s`);
		timer = setTimeout(connect, delay);
		delay = Math.min(delay * 2, 30000);
	}

	connect();
	return {
		stop()
		{
			stopped = true;
			clearTimeout(timer);
			clearTimeout(watchdog);
			if (ctrl)
				ctrl.abort();
		}
	};
}
