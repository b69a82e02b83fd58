// Command linkshaper delays, drops or blocks the packets of one network link, as tc netem would
// on a kernel built without it. It runs inside a network namespace whose iptables rules send
// the link's outgoing packets to NFQUEUE queue -out and its incoming ones to queue -in, and
// gives each packet its verdict: dropped (the direction is down, or it is lost), or accepted
// after the direction's delay plus a random jitter. A direction keeps its packets in order: a
// packet is never released before the one queued ahead of it, as on a real link.
//
// It reads one JSON object per line on stdin, each direction's shape, and answers each with one
// JSON line on stdout, the counts so far:
//
//	{"out": {"delay_ms": 100, "jitter_ms": 10, "loss": 0.05, "down": false}, "in": {...}}
//	{"ok": true, "out": {"passed": 12, "dropped": 1}, "in": {"passed": 9, "dropped": 0}}
//
// A direction given is set whole (a field left out is 0, or false); a direction left out keeps
// its shape; {} asks for the counts alone. A line it cannot read is
// answered {"ok": false, "error": "..."} and changes nothing. It exits when stdin closes: its
// queues then have no reader, and the kernel drops what they get (the link is cut, never left
// open by accident).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	nfqueue "github.com/florianl/go-nfqueue/v2"
	"github.com/mdlayher/netlink"
)

// Shape is one direction's behaviour.
type Shape struct {
	DelayMs  float64 `json:"delay_ms"`
	JitterMs float64 `json:"jitter_ms"`
	Loss     float64 `json:"loss"`
	Down     bool    `json:"down"`
}

func (s Shape) check() error {
	switch {
	case s.DelayMs < 0 || s.DelayMs > 60_000:
		return fmt.Errorf("delay_ms must be between 0 and 60000, got %g", s.DelayMs)
	case s.JitterMs < 0 || s.JitterMs > s.DelayMs:
		return fmt.Errorf("jitter_ms must be between 0 and delay_ms (%g), got %g", s.DelayMs, s.JitterMs)
	case s.Loss < 0 || s.Loss > 1:
		return fmt.Errorf("loss must be between 0 and 1, got %g", s.Loss)
	}
	return nil
}

// Counts is what a direction did with its packets.
type Counts struct {
	Passed  uint64 `json:"passed"`
	Dropped uint64 `json:"dropped"`
}

type held struct {
	id    uint32
	until time.Time
}

// direction is one queue: its shape, its counts and its delay line.
type direction struct {
	mu     sync.Mutex
	shape  Shape
	counts Counts
	last   time.Time
	line   chan held
	nf     *nfqueue.Nfqueue
}

func (d *direction) packet(id uint32) {
	verdict := d.decide(id)
	if verdict >= 0 {
		_ = d.nf.SetVerdict(id, verdict)
	}
}

// decide counts the packet and gives its verdict now, or -1 when it went into the delay line.
func (d *direction) decide(id uint32) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.shape
	if s.Down || (s.Loss > 0 && rand.Float64() < s.Loss) {
		d.counts.Dropped++
		return nfqueue.NfDrop
	}
	wait := s.DelayMs
	if s.JitterMs > 0 {
		wait += (rand.Float64()*2 - 1) * s.JitterMs
	}
	now := time.Now()
	until := now.Add(time.Duration(wait * float64(time.Millisecond)))
	if until.Before(d.last) {
		until = d.last // in order: never before the packet ahead
	}
	if !until.After(now) && len(d.line) == 0 {
		d.counts.Passed++
		return nfqueue.NfAccept
	}
	select {
	case d.line <- held{id, until}:
		d.last = until
		d.counts.Passed++
		return -1
	default: // the line is full: dropped, as a full link buffer would
		d.counts.Dropped++
		return nfqueue.NfDrop
	}
}

func (d *direction) release() {
	for h := range d.line {
		time.Sleep(time.Until(h.until))
		_ = d.nf.SetVerdict(h.id, nfqueue.NfAccept)
	}
}

func open(ctx context.Context, queue uint, length int) (*direction, error) {
	nf, err := nfqueue.Open(&nfqueue.Config{
		NfQueue:      uint16(queue),
		MaxQueueLen:  uint32(length),
		Copymode:     nfqueue.NfQnlCopyMeta,
		WriteTimeout: time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("queue %d: %w", queue, err)
	}
	if err := nf.SetOption(netlink.NoENOBUFS, true); err != nil {
		return nil, fmt.Errorf("queue %d: %w", queue, err)
	}
	d := &direction{nf: nf, line: make(chan held, length)}
	hook := func(a nfqueue.Attribute) int {
		if a.PacketID != nil {
			d.packet(*a.PacketID)
		}
		return 0
	}
	var told atomic.Int32
	failed := func(e error) int {
		if ctx.Err() != nil || errors.Is(e, os.ErrDeadlineExceeded) {
			return 0
		}
		// Said a few times only: a reader that keeps failing must not fill its stderr.
		if n := told.Add(1); n <= 10 {
			fmt.Fprintf(os.Stderr, "linkshaper: queue %d: %v\n", queue, e)
		}
		return 0
	}
	if err := nf.RegisterWithErrorFunc(ctx, hook, failed); err != nil {
		return nil, fmt.Errorf("queue %d: %w", queue, err)
	}
	go d.release()
	return d, nil
}

type request struct {
	Out *Shape `json:"out"`
	In  *Shape `json:"in"`
}

type answer struct {
	OK    bool    `json:"ok"`
	Error string  `json:"error,omitempty"`
	Out   *Counts `json:"out,omitempty"`
	In    *Counts `json:"in,omitempty"`
}

func handle(line []byte, out, in *direction) answer {
	var req request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return answer{Error: "not a shape request: " + err.Error()}
	}
	for name, s := range map[string]*Shape{"out": req.Out, "in": req.In} {
		if s != nil {
			if err := s.check(); err != nil {
				return answer{Error: name + ": " + err.Error()}
			}
		}
	}
	a := answer{OK: true}
	for _, p := range []struct {
		d *direction
		s *Shape
		c **Counts
	}{{out, req.Out, &a.Out}, {in, req.In, &a.In}} {
		p.d.mu.Lock()
		if p.s != nil {
			p.d.shape = *p.s
		}
		c := p.d.counts
		p.d.mu.Unlock()
		*p.c = &c
	}
	return a
}

func main() {
	outQueue := flag.Uint("out", 1, "NFQUEUE number of the link's outgoing packets")
	inQueue := flag.Uint("in", 2, "NFQUEUE number of the link's incoming packets")
	length := flag.Int("queue-length", 8192, "packets each direction may hold (more are dropped)")
	flag.Parse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, err := open(ctx, *outQueue, *length)
	if err == nil {
		var in *direction
		in, err = open(ctx, *inQueue, *length)
		if err == nil {
			serve(out, in)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "linkshaper: %v\n", err)
	os.Exit(1)
}

func serve(out, in *direction) {
	w := json.NewEncoder(os.Stdout)
	_ = w.Encode(answer{OK: true, Out: &Counts{}, In: &Counts{}}) // ready
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		if len(scanner.Bytes()) == 0 {
			continue
		}
		_ = w.Encode(handle(scanner.Bytes(), out, in))
	}
}
