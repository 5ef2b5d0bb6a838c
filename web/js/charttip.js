// charttip.js — what the pages' charts share: a tooltip with the exact
// values of the point under the pointer (or under the keyboard's cursor:
// a chart takes the focus, the arrow keys walk its points, Home and End
// jump to its ends, Escape hides the tip), and the empty state drawn
// inside a chart's box when it has nothing to show.
//
// The tip's text comes from the page (it knows the units); this module
// only places it. The tip is a <div role="tooltip"> inside the chart's box
// and the box's aria-describedby points at it, so a screen reader reads
// the focused point's values.

import {el} from './api.js';

let serial = 0;

// The tip element of `box` (made once), placed at (x, y) of the box,
// kept inside it: flipped left of the point near the right edge, above
// it near the bottom.
function tipOf(box)
{
	let tip = box.querySelector(':scope > .chart-tip');
	if (!tip) {
		tip = el('div', {class: 'chart-tip', role: 'tooltip', id: `chart-tip-${++serial}`, hidden: true});
		box.append(tip);
		box.setAttribute('aria-describedby', tip.id);
	}
	return tip;
}

// A uPlot axis as wide as its widest label (a fixed size cut "381.47 GiB"
// to "81.47 GiB", and "$0.000000004" to ".000000004")
export function axisSize(u, values)
{
	const longest = Math.max(4, ...(values || []).map(v => String(v).length));
	return Math.ceil(longest * 7.2) + 18;
}

export function showTip(box, lines, x, y)
{
	const tip = tipOf(box);
	tip.replaceChildren(...lines.map(l => el('div', {class: l.cls || null}, l.text ?? l)));
	tip.hidden = false;
	const bw = box.clientWidth, bh = box.clientHeight;
	const tw = tip.offsetWidth, th = tip.offsetHeight;
	let left = x + 14, top = y + 14;
	if (left + tw > bw)
		left = Math.max(0, x - 14 - tw);
	if (top + th > bh)
		top = Math.max(0, y - 14 - th);
	tip.style.left = `${left}px`;
	tip.style.top = `${top}px`;
}

export function hideTip(box)
{
	const tip = box.querySelector(':scope > .chart-tip');
	if (tip)
		tip.hidden = true;
}

// The empty state inside `box` ("" removes it): a line of text over the
// chart's area, so a chart with nothing to show does not look broken.
export function setEmpty(box, text)
{
	let p = box.querySelector(':scope > .chart-empty');
	if (!text) {
		if (p)
			p.remove();
		box.classList.remove('is-empty');
		return;
	}
	if (!p) {
		p = el('p', {class: 'chart-empty'});
		box.append(p);
	}
	p.textContent = text;
	box.classList.add('is-empty');
}

// The arrow keys over a chart of `count()` points: `show(i)` draws point i
// (and its tip), `hide()` clears it. The box becomes focusable. A chart
// drawn anew in the same box (the billing chart is) replaces the
// callbacks; the listeners stay one pair.
const walks = new WeakMap();

export function keyWalk(box, count, show, hide)
{
	const had = walks.get(box);
	const w = {at: -1, count, show, hide};
	walks.set(box, w);
	if (had)
		return;
	box.tabIndex = 0;
	box.addEventListener('keydown', e => {
		const k = walks.get(box);
		const n = k.count();
		if (!n)
			return;
		let next;
		if (e.key === 'ArrowRight' || e.key === 'ArrowUp')
			next = k.at < 0 ? 0 : Math.min(n - 1, k.at + 1);
		else if (e.key === 'ArrowLeft' || e.key === 'ArrowDown')
			next = k.at < 0 ? n - 1 : Math.max(0, k.at - 1);
		else if (e.key === 'Home')
			next = 0;
		else if (e.key === 'End')
			next = n - 1;
		else if (e.key === 'Escape')
			next = -1;
		else
			return;
		e.preventDefault();
		k.at = next;
		if (next < 0)
			k.hide();
		else
			k.show(next);
	});
	box.addEventListener('blur', () => {
		const k = walks.get(box);
		k.at = -1;
		k.hide();
	});
}

// A uPlot plugin: the tip of the point under the cursor, from
// `lines(u, idx)` (an array of strings or {text, cls}; empty: no tip), and
// the keyboard walk over the indices `keys(u)` returns (default: all).
export function uplotTip(lines, keys)
{
	return {
		hooks: {
			init: u => {
				const box = u.root.parentElement;
				const indices = () => (keys ? keys(u) : u.data[0].map((_, i) => i));
				keyWalk(box, () => indices().length, k => {
					const i = indices()[k];
					const ys = u.series.slice(1).map((s, j) => u.data[j + 1][i]).filter(v => v !== null && v !== undefined);
					const top = ys.length ? u.valToPos(Math.max(...ys), u.series[1].scale || 'y') : u.bbox.height / devicePixelRatio / 2;
					u.setCursor({left: u.valToPos(u.data[0][i], 'x'), top});
				}, () => u.setCursor({left: -10, top: -10}));
			},
			setCursor: u => {
				const box = u.root.parentElement;
				const {idx, left, top} = u.cursor;
				const text = idx === null || idx === undefined || left < 0 ? [] : lines(u, idx);
				if (!text.length) {
					hideTip(box);
					return;
				}
				// the cursor is relative to the plot area (u.over)
				const o = u.over.getBoundingClientRect(), b = box.getBoundingClientRect();
				showTip(box, text, left + o.left - b.left, top + o.top - b.top);
			}
		}
	};
}
