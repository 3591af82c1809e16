package librelay

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestSpecialBytes holds the eight-at-a-time test to the byte table.
func TestSpecialBytes(t *testing.T) {
	check := func(word [8]byte) {
		want := false
		for _, c := range word {
			want = want || !plainByte[c]
		}
		if got := specialBytes(binary.LittleEndian.Uint64(word[:])) != 0; got != want {
			t.Fatalf("specialBytes(%q) = %v, want %v", word, got, want)
		}
	}
	for _, fill := range []byte{'a', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xff} {
		for c := range 256 {
			for pos := range 8 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		var w [8]byte
		for i := range w {
			w[i] = byte(rng.IntN(256))
		}
		check(w)
	}
}

func TestSkipPlain(t *testing.T) {
	b := []byte("0123456789abcdefghij\"klmnop")
	for start := range 21 {
		if got := skipPlain(b, start); got != 20 {
			t.Fatalf("skipPlain from %d = %d, want 20", start, got)
		}
	}
	if got := skipPlain([]byte("plain to the end"), 3); got != 16 {
		t.Fatalf("skipPlain to end = %d", got)
	}
}

func TestSyntaxErrorMessages(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":x}`:      "invalid character 'x' at offset 8",
		"{\"type\":\x01}": "invalid character 0x01 at offset 8",
		`{"type":"a"`:     "unexpected end of JSON input",
	} {
		_, err := ParseFrame([]byte(in))
		if !errors.Is(err, ErrMalformedFrame) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("ParseFrame(%q) = %v, want ...%s", in, err, want)
		}
	}
}

// deepFrame is a frame whose payload nests depth containers, alternating
// arrays and objects, so that the whole frame nests depth+1 deep.
func deepFrame(depth int) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"x","payload":`)
	for i := range depth {
		if i%2 == 0 {
			b.WriteString(`[`)
		} else {
			b.WriteString(`{"k":`)
		}
	}
	b.WriteString(`0`)
	for i := depth - 1; i >= 0; i-- {
		if i%2 == 0 {
			b.WriteString(`]`)
		} else {
			b.WriteString(`}`)
		}
	}
	b.WriteString(`}`)
	return []byte(b.String())
}

// TestDeepNestingAsEncodingJSON: the limit is encoding/json's (and so the
// reference Reader's), counting the frame's own object, and the Reader's
// answer past it is ErrMalformedFrame, the line consumed.
func TestDeepNestingAsEncodingJSON(t *testing.T) {
	for _, depth := range []int{255, 256, 257, 1000, maxDepth - 2, maxDepth - 1, maxDepth, maxDepth + 1} {
		line := deepFrame(depth)
		var ref Frame
		refErr := json.Unmarshal(line, &ref)
		got, err := ParseFrame(line)
		if (err == nil) != (refErr == nil) || err == nil && !bytes.Equal(got.Payload, ref.Payload) {
			t.Fatalf("depth %d: ParseFrame %v, encoding/json %v", depth, err, refErr)
		}
		if wantOK := depth+1 <= maxDepth; (err == nil) != wantOK {
			t.Fatalf("depth %d+1: ParseFrame %v, want accepted=%v", depth, err, wantOK)
		}
		if err != nil && !errors.Is(err, ErrMalformedFrame) {
			t.Fatalf("depth %d: %v, want ErrMalformedFrame", depth, err)
		}
		r := NewReader(bytes.NewReader(append(append(line, '\n'), `{"type":"next"}`+"\n"...)))
		if _, err := r.ReadFrame(); (err == nil) != (refErr == nil) {
			t.Fatalf("depth %d: Reader %v", depth, err)
		}
		if f, err := r.ReadFrame(); err != nil || f.Type != "next" {
			t.Fatalf("depth %d: the next line: %+v, %v", depth, f, err)
		}
	}
}

// TestNestedMatchesValid holds the iterative scanner to json.Valid on random
// mixed nestings that cross the 256 levels kept on the stack, well-formed and
// broken at a random byte.
func TestNestedMatchesValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		var b []byte
		var closers []byte
		for range 1 + rng.IntN(600) {
			switch rng.IntN(3) {
			case 0:
				b, closers = append(b, '['), append(closers, ']')
			case 1:
				b, closers = append(b, `{"a":`...), append(closers, '}')
			default:
				b, closers = append(b, `[1,{"b":[]},`...), append(closers, ']')
			}
		}
		b = append(b, `"leaf"`...)
		for i := len(closers) - 1; i >= 0; i-- {
			if rng.IntN(4) == 0 {
				b = append(b, `,"x"`...)
				if closers[i] == '}' {
					b = append(b, `:true`...)
				}
			}
			b = append(b, closers[i])
		}
		for _, in := range [][]byte{b, mutate(rng, b)} {
			_, err := checkValue(in, 0)
			if got, want := err == nil, json.Valid(in); got != want {
				t.Fatalf("checkValue(%s) = %v, json.Valid = %v", in, err, want)
			}
		}
	}
}

func mutate(rng *rand.Rand, b []byte) []byte {
	m := bytes.Clone(b)
	const alphabet = `[]{},:"0 x`
	m[rng.IntN(len(m))] = alphabet[rng.IntN(len(alphabet))]
	return m
}

// TestDeepFrameStack: scanning a frame nested maxDepth deep does not grow
// the goroutine's stack, so a socket reader that read one keeps no more stack
// than one that never did. Each of 32 goroutines parses such a frame and
// then waits; StackInuse rises by about their starting stacks only (a
// recursive scanner grew each by about 1 MiB, which stayed).
func TestDeepFrameStack(t *testing.T) {
	line := deepFrame(maxDepth - 1)
	if _, err := ParseFrame(line); err != nil {
		t.Fatal(err)
	}
	perGoroutine := func(parse bool) uint64 {
		const n = 32
		var ready, done sync.WaitGroup
		release := make(chan struct{})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				if parse {
					if _, err := ParseFrame(line); err != nil {
						panic(err)
					}
				}
				ready.Done()
				<-release
			}()
		}
		ready.Wait()
		runtime.GC()
		runtime.ReadMemStats(&after)
		close(release)
		done.Wait()
		if after.StackInuse < before.StackInuse {
			return 0
		}
		return (after.StackInuse - before.StackInuse) / n
	}
	idle, deep := perGoroutine(false), perGoroutine(true)
	t.Logf("stack per goroutine: %d bytes idle, %d bytes after a frame nested %d deep", idle, deep, maxDepth)
	if deep > idle+32<<10 {
		t.Fatalf("a deep frame grew each goroutine's stack by %d bytes (idle %d)", deep-idle, idle)
	}
}
