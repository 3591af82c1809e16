package librelay

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// Codec-level failures. ErrFrameTooLarge is the only one that ends a
// connection: every other error here is per-frame and the Reader resumes at
// the next line, because a peer that emits one bad frame has not proved the
// stream is unusable.
var (
	ErrFrameTooLarge = errors.New("librelay: frame exceeds MaxFrameBytes")
	ErrReaderClosed  = errors.New("librelay: reader is unusable after a framing error")
)

const (
	// readBufferSize is a Reader's starting buffer; it grows for a long
	// line, up to what MaxFrameBytes needs, and shrinks back afterwards so
	// one large frame does not pin megabytes to an idle connection.
	readBufferSize = 16 << 10
	// maxLineBuffer holds MaxFrameBytes and one more byte: a line is
	// MaxFrameBytes at most counting its newline, and seeing MaxFrameBytes+1
	// bytes without one proves the line too long without reading further.
	// (MaxFrameBytes bytes and then the end of the source is a truncated
	// frame, not an oversized one, so the limit itself must fit.)
	maxLineBuffer = MaxFrameBytes + 1
	// shrinkAbove is the buffer size past which an idle Reader gives
	// memory back; below it, a stream of large frames reuses the buffer.
	shrinkAbove = 1 << 20
	// maxRetainedWrite bounds the encode buffer a Writer keeps between
	// frames.
	maxRetainedWrite = 64 << 10
	// maxEmptyReads is how many (0, nil) reads in a row are taken as a
	// broken io.Reader rather than a slow one, as bufio does.
	maxEmptyReads = 100
)

// Reader decodes NDJSON frames from a stream. It is not safe for concurrent
// use; one goroutine owns the read side of a connection.
type Reader struct {
	r       io.Reader
	buf     []byte
	lo, hi  int   // buf[lo:hi] is read but not yet consumed
	scanned int   // buf[lo:lo+scanned] is known to hold no newline
	err     error // the source's error, returned once buffered lines run out
	closed  bool  // a framing error happened; nothing more will be read
}

// NewReader returns a Reader that reads frames from r, buffering at most
// about MaxFrameBytes of it.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// ReadFrame returns the next frame.
//
// It distinguishes two kinds of failure, and callers must too. A malformed or
// invalid frame (ErrMalformedFrame or a validation error) is reported with
// the line already consumed, so calling ReadFrame again is correct and reads
// the next frame; this is what lets one garbled message not take down a
// connection carrying other sessions. ErrFrameTooLarge is different: the
// offending line has not been consumed and cannot be, since consuming it is
// the unbounded read the limit exists to prevent — at most MaxFrameBytes+1 of
// it has been read. The Reader is dead after it and every later call returns
// ErrReaderClosed: resynchronizing on a newline an attacker chose would hand
// them control of where the next frame starts.
//
// A line is at most MaxFrameBytes counting everything in it: the frame, any
// whitespace around it, a CR and the LF that ends it. This is the reference
// Reader's count, and the one Writer writes to.
//
// Lines end with LF; a CR before it is ignored, and a line that is empty or
// only whitespace is skipped — whitespace as bytes.TrimSpace has it, which
// includes Unicode spaces such as U+0085 and U+00A0 and the ASCII \v and \f
// that JSON does not count as whitespace, as the reference Reader has it.
// When the source ends, a final line without a newline is a truncated frame:
// io.ErrUnexpectedEOF, or io.EOF if the line is blank. The source's error is
// returned once no complete line is left, and again on every later call; an
// end of input (an error that is io.EOF) is returned as io.EOF itself.
func (r *Reader) ReadFrame() (Frame, error) {
	for {
		line, err := r.line()
		if err != nil {
			return Frame{}, err
		}
		if !blank(line) {
			return ParseFrame(line)
		}
	}
}

// blank reports whether a line is skipped: bytes.TrimSpace leaves nothing of
// it. The first and last bytes decide at once for any line that is a frame.
func blank(line []byte) bool {
	if n := len(line); n == 0 || line[0] == '{' || line[n-1] == '}' {
		return n == 0
	}
	return len(bytes.TrimSpace(line)) == 0
}

// line returns the next line without its LF; the slice is valid until the
// next call.
func (r *Reader) line() ([]byte, error) {
	if r.closed {
		return nil, ErrReaderClosed
	}
	r.shrink()
	for {
		if i := bytes.IndexByte(r.buf[r.lo+r.scanned:r.hi], '\n'); i >= 0 {
			end := r.lo + r.scanned + i
			return r.consume(end, end+1)
		}
		r.scanned = r.hi - r.lo
		if r.scanned > MaxFrameBytes {
			return nil, r.tooLarge()
		}
		if r.err != nil {
			return nil, r.sourceEnded()
		}
		r.fill()
	}
}

// consume takes buf[lo:end] as a line and resumes reading at next, past the
// LF. The line with its LF must fit in MaxFrameBytes.
func (r *Reader) consume(end, next int) ([]byte, error) {
	line := r.buf[r.lo:end]
	if len(line) >= MaxFrameBytes {
		return nil, r.tooLarge()
	}
	r.lo, r.scanned = next, 0
	return line, nil
}

// sourceEnded reports the source's error once no complete line is pending.
// A partial line is dropped: at the end of input it is a truncated frame
// (io.ErrUnexpectedEOF) unless it is blank, and after any other error it is
// lost with the stream, as the reference Reader loses it.
func (r *Reader) sourceEnded() error {
	pending := r.buf[r.lo:r.hi]
	r.lo, r.hi, r.scanned = 0, 0, 0
	if !errors.Is(r.err, io.EOF) {
		return r.err
	}
	if !blank(pending) {
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}

func (r *Reader) tooLarge() error {
	r.closed = true
	r.buf = nil
	return ErrFrameTooLarge
}

// fill reads once from the source into free buffer space, first making room
// by moving pending bytes to the front or growing the buffer.
func (r *Reader) fill() {
	if r.hi == len(r.buf) {
		r.makeRoom()
	}
	for range maxEmptyReads {
		n, err := r.r.Read(r.buf[r.hi:])
		r.hi += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

func (r *Reader) makeRoom() {
	pending := r.hi - r.lo
	size := len(r.buf)
	if size == 0 {
		size = readBufferSize
	} else if pending > size/2 {
		size = min(2*size, maxLineBuffer)
	}
	buf := r.buf
	if size != len(r.buf) {
		buf = make([]byte, size)
	}
	copy(buf, r.buf[r.lo:r.hi])
	r.buf, r.lo, r.hi = buf, 0, pending
}

// shrink drops a buffer grown for a long line once little is pending.
func (r *Reader) shrink() {
	if len(r.buf) <= shrinkAbove || r.hi-r.lo > readBufferSize/2 {
		return
	}
	buf := make([]byte, readBufferSize)
	r.hi = copy(buf, r.buf[r.lo:r.hi])
	r.buf, r.lo = buf, 0
}

// Writer encodes frames as NDJSON. It is safe for concurrent use: a
// connection is written by more than one goroutine (a session stream and a
// heartbeat, at minimum) and an interleaved frame is a corrupt stream, not a
// slow one.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer that writes frames to w, each with exactly one
// call to w.Write.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame validates and writes f followed by a newline. The line, newline
// included, is at most MaxFrameBytes (AppendFrame refuses a longer one with
// ErrFrameTooLarge), so no Reader, ours or the reference, refuses what it
// writes.
//
// It fails closed: an invalid frame is never partially written, because the
// encoding (AppendFrame) happens into a buffer and reaches the connection as
// a single Write. A frame that failed halfway across would desynchronize
// framing for every session sharing the connection, not just its own. The
// payload is compacted, so a newline in it cannot split the frame. Errors are
// AppendFrame's, or the underlying writer's.
func (w *Writer) WriteFrame(f Frame) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := AppendFrame(w.buf[:0], &f)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if cap(b) <= maxRetainedWrite {
		w.buf = b
	}
	_, err = w.w.Write(b)
	return err
}
