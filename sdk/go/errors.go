package kshard

import (
	"errors"
	"fmt"
)

// Sentinels for errors.Is: each matches a *SidecarError of that code; ErrOutcomeUnknown and
// ErrSidecarUnavailable also match a *TransportError.
var (
	ErrBadRequest         = errors.New("kshard: BadRequest")
	ErrPayloadTooLarge    = errors.New("kshard: PayloadTooLarge")
	ErrNotReady           = errors.New("kshard: NotReady")
	ErrEntityOverloaded   = errors.New("kshard: EntityOverloaded")
	ErrSendTimeout        = errors.New("kshard: SendTimeout")
	ErrAppUnavailable     = errors.New("kshard: AppUnavailable")
	ErrOutcomeUnknown     = errors.New("kshard: OutcomeUnknown")
	ErrSidecarUnavailable = errors.New("kshard: the sidecar could not be reached")
)

var codeSentinels = map[string]error{
	"BadRequest":       ErrBadRequest,
	"InvalidArgument":  ErrBadRequest,
	"PayloadTooLarge":  ErrPayloadTooLarge,
	"NotReady":         ErrNotReady,
	"EntityOverloaded": ErrEntityOverloaded,
	"SendTimeout":      ErrSendTimeout,
	"AppUnavailable":   ErrAppUnavailable,
	"OutcomeUnknown":   ErrOutcomeUnknown,
}

// SidecarError is an error the sidecar made itself (it carried Kshard-Error), not the app's
// answer. Code is one of docs/openapi/sidecar.yaml's, e.g. SendTimeout or OutcomeUnknown.
type SidecarError struct {
	Status  int
	Code    string
	Message string
}

func (e *SidecarError) Error() string {
	return fmt.Sprintf("kshard sidecar: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is matches the sentinel of e's code.
func (e *SidecarError) Is(target error) bool {
	s, ok := codeSentinels[e.Code]
	return ok && s == target
}

// Delivered says whether the message may have reached the entity: false when the sidecar says
// it surely did not (it may be sent again), true for OutcomeUnknown and unknown codes.
func (e *SidecarError) Delivered() bool {
	switch e.Code {
	case "BadRequest", "InvalidArgument", "PayloadTooLarge", "NotReady", "EntityOverloaded",
		"SendTimeout", "AppUnavailable", "NotFound", "MethodNotAllowed":
		return false
	}
	return true
}

// TransportError is a failed exchange with the sidecar itself. When Sent is false the request
// never went out (errors.Is ErrSidecarUnavailable); when true it went out and no answer came
// (the call's timeout, a broken connection): errors.Is ErrOutcomeUnknown, as the message may
// have been applied. Err is the cause (context.DeadlineExceeded on a timeout).
type TransportError struct {
	Sent bool
	Err  error
}

func (e *TransportError) Error() string {
	if e.Sent {
		return "kshard: no answer from the sidecar, the outcome is unknown: " + e.Err.Error()
	}
	return "kshard: the sidecar could not be reached: " + e.Err.Error()
}

func (e *TransportError) Unwrap() error { return e.Err }

// Is matches ErrOutcomeUnknown or ErrSidecarUnavailable.
func (e *TransportError) Is(target error) bool {
	if e.Sent {
		return target == ErrOutcomeUnknown
	}
	return target == ErrSidecarUnavailable
}

// IsOutcomeUnknown says whether err leaves the message maybe applied: retry it only with an
// Idempotency-Key the app checks.
func IsOutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }
