package client

import (
	"testing"
	"time"
)

// An alarm read long after it was due (the client was not running) is drawn
// out once by stallGrace, and fires again after it; a second late read is
// acted on. The browser tests stall a real page (TestAPI…DuringAStall).
func TestAlarmOversleptOnce(t *testing.T) {
	var al alarm
	al.set(time.Millisecond)
	time.Sleep(stallSlack + 50*time.Millisecond) // not read meanwhile: a stall
	<-al.C()
	if !al.overslept() {
		t.Fatal("an alarm read more than stallSlack late was acted on at once")
	}
	start := time.Now()
	<-al.C()
	if waited := time.Since(start); waited < stallGrace-10*time.Millisecond {
		t.Fatalf("drawn out by %v, want stallGrace (%v)", waited, stallGrace)
	}
	time.Sleep(stallSlack)
	if al.overslept() {
		t.Fatal("an alarm was drawn out twice")
	}
	al.set(time.Millisecond)
	time.Sleep(stallSlack + 50*time.Millisecond)
	<-al.C()
	if !al.overslept() {
		t.Fatal("set again, the alarm was not drawn out for a new stall")
	}
	al.stop()
}
