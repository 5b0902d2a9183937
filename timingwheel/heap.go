package timingwheel

// The bucket priority queue: a binary min-heap of buckets by expiration, each
// bucket remembering its index so that an emptied bucket leaves in O(log n).
// It holds buckets, not timers, so it never has more than levels × wheelSize
// entries and the driver wakes once per non-empty bucket, not once per tick.

func (w *wheel) heapPush(b *bucket) {
	b.heapIdx = len(w.heap)
	w.heap = append(w.heap, b)
	w.heapUp(b.heapIdx)
}

func (w *wheel) heapPop() *bucket {
	b := w.heap[0]
	w.heapRemove(b)
	return b
}

func (w *wheel) heapRemove(b *bucket) {
	i := b.heapIdx
	last := len(w.heap) - 1
	if i != last {
		w.heapSwap(i, last)
	}
	w.heap[last] = nil
	w.heap = w.heap[:last]
	b.heapIdx = -1
	if i != last {
		w.heapFix(i)
	}
}

// heapFix restores the order after the key of the bucket at i changed.
func (w *wheel) heapFix(i int) {
	if !w.heapDown(i) {
		w.heapUp(i)
	}
}

func (w *wheel) heapSwap(i, j int) {
	h := w.heap
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}

func (w *wheel) heapUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if w.heap[p].exp <= w.heap[i].exp {
			return
		}
		w.heapSwap(i, p)
		i = p
	}
}

// heapDown reports whether the element at i moved.
func (w *wheel) heapDown(i int) bool {
	start := i
	n := len(w.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && w.heap[r].exp < w.heap[l].exp {
			m = r
		}
		if w.heap[i].exp <= w.heap[m].exp {
			break
		}
		w.heapSwap(i, m)
		i = m
	}
	return i > start
}
