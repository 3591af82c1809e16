package librelay

// relayError is how this package adds context to a sentinel without fmt: the
// browser module links librelay and pays for every package it imports, and fmt
// alone costs more than the codec. It unwraps to every error it names, so
// errors.Is matches the sentinel and anything underneath it.
type relayError struct {
	msg  string
	errs []error
}

func (e *relayError) Error() string   { return e.msg }
func (e *relayError) Unwrap() []error { return e.errs }

// wrap returns err with detail appended to its message; errors.Is(result, err)
// holds.
func wrap(err error, detail string) error {
	return &relayError{msg: err.Error() + ": " + detail, errs: []error{err}}
}

// wrapBoth returns an error that matches outer and inner, reading as
// "outer: inner".
func wrapBoth(outer, inner error) error {
	return &relayError{msg: outer.Error() + ": " + inner.Error(), errs: []error{outer, inner}}
}
