package index

// warmBytes is the size of the index's "warm" tail, as in Kafka: lookups whose
// target lies in the last 8 KiB of entries search only that tail, so the
// fetches of in-sync consumers and followers (which ask for recent offsets)
// touch the same two or three recently written pages and never fault in cold
// pages from the head of a large index. 8 KiB is small enough that every warm
// lookup touches all the warm pages (with 4 KiB pages), which keeps them
// resident.
const warmBytes = 8192

// largestLE returns the largest slot in [0, n) whose key is <= target, or -1
// if there is none. warm is the number of entries in the warm tail. Keys must
// be non-decreasing for the answer to be the largest; on any bytes at all the
// slot returned is in range and its key is <= target.
func largestLE(n, warm int, target int64, key func(int) int64) int {
	if n == 0 {
		return -1
	}
	lo, hi := 0, n-1
	if hot := max(0, n-1-warm); key(hot) <= target {
		lo = hot // the target is in the warm tail
	} else if key(0) > target {
		return -1
	} else {
		hi = hot - 1 // hot > 0 here: key(0) <= target < key(hot)
	}
	// Invariant: key(lo) <= target; the answer is in [lo, hi].
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		if key(mid) <= target {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// firstGE returns the smallest slot in [0, n) whose key is >= target, or n.
// Keys must be non-decreasing (duplicates allowed).
func firstGE(n int, target int64, key func(int) int64) int {
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if key(mid) < target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
