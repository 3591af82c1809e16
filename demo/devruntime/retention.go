package devruntime

// retention keeps the newest encoded frames of one session, bounded by count
// and by bytes, so a client that reconnects can be replayed what it missed
// and a session nobody resumes costs at most the bounds. The frames it holds
// always have consecutive seqs ending at the session's last seq, because only
// the oldest frame is ever evicted; so a frame's seq is implied by its position
// and only the lines themselves are stored.
//
// It grows on demand rather than preallocating maxFrames slots: most sessions
// are short, and an idle session should cost little.
type retention struct {
	maxFrames int
	maxBytes  int

	lines [][]byte // lines[start:] are retained, oldest first
	start int
	bytes int
}

// add retains line as the newest frame and evicts the oldest frames until both
// bounds hold again. The newest frame is always kept, even when it alone is
// larger than maxBytes: a resume right after it must still find it.
func (r *retention) add(line []byte) {
	r.lines = append(r.lines, line)
	r.bytes += len(line)
	for r.len() > 1 && (r.len() > r.maxFrames || r.bytes > r.maxBytes) {
		r.bytes -= len(r.lines[r.start])
		r.lines[r.start] = nil
		r.start++
	}
	if r.start > 64 && r.start > len(r.lines)/2 {
		r.lines = append(r.lines[:0:0], r.lines[r.start:]...)
		r.start = 0
	}
}

func (r *retention) len() int { return len(r.lines) - r.start }

// oldest is the seq of the oldest retained frame given the session's last
// seq; it is last+1 when nothing is retained.
func (r *retention) oldest(last uint64) uint64 { return last - uint64(r.len()) + 1 }

// since returns the retained lines with seq >= from, oldest first; the slice
// aliases the retention and is only valid under the session's lock.
func (r *retention) since(from, last uint64) [][]byte {
	oldest := r.oldest(last)
	if from < oldest {
		from = oldest
	}
	if from > last {
		return nil
	}
	return r.lines[r.start+int(from-oldest):]
}
