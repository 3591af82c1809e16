package relay

import "github.com/relaywasm/relaywasm/librelay"

// One direction, ending or starting at the relay. Spec 001 gives some cargo
// types a single direction between the relay and the machine: the relay
// starts chain_trigger (and, in contenox v1.0.0, ask.verdict) and the
// machine answers or reports with chain_trigger_result, ask.published and
// ask.resolved, which carry no session and are addressed to the relay. None
// of them is browser traffic, so the relay never carries one between the
// legs:
//
//   - from a browser, any of them is refused: a request gets relay.error
//     unsupported_type (its one reply), a notification or response gets
//     nothing, and nothing reaches the runtime. A browser credential is not
//     a licence to start the machine's chains or to answer its asks.
//   - from the runtime, any of them is the relay's to handle. The dev relay
//     runs no chains and keeps no asks, so it drops them (a request among
//     them gets unsupported_type); none ever reaches a browser, whatever
//     session it names.
//
// Types the relay does not list here are routed as cargo, unknown ones
// included (spec 000: unknown is never fatal).
const (
	relayToMachine = "relay→machine"
	machineToRelay = "machine→relay"
)

// direction returns the one direction spec 001 allows typ, or "" for cargo
// the relay routes between the legs. A switch, not a map: it runs on every
// frame either way.
func direction(typ string) string {
	switch typ {
	case librelay.TypeChainTrigger, librelay.TypeAskVerdict:
		return relayToMachine
	case librelay.TypeChainTriggerResult, librelay.TypeAskPublished, librelay.TypeAskResolved:
		return machineToRelay
	}
	return ""
}

// notRouted is the relay's answer to a frame of a type in the table above,
// arriving on either leg: relay.error unsupported_type when it is a request,
// nothing otherwise.
func notRouted(f *librelay.Frame, dir, leg string) *librelay.Frame {
	if !f.IsRequest() {
		return nil
	}
	return ptr(librelay.NewError(*f, librelay.CodeUnsupportedType,
		f.Type+" is "+dir+" only; the relay does not carry it from the "+leg))
}
