package contracts

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNoRoute is returned by Route when the outputs carry no usable value
// for the routing output.
var ErrNoRoute = errors.New("no valid route")

// Route returns the value of the routing output in outputs, which should
// already have been validated. It returns "" and nil when the working copy
// has no routing output.
func (w Working) Route(outputs json.RawMessage) (string, error) {
	if w.RoutingOutput == "" {
		return "", nil
	}
	doc, err := decodeValue(outputs)
	if err != nil {
		return "", fmt.Errorf("contracts: route: decode outputs: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return "", fmt.Errorf("contracts: route: outputs must be an object: %w", ErrNoRoute)
	}
	raw, ok := obj[w.RoutingOutput]
	if !ok {
		return "", fmt.Errorf("contracts: route: output %q is missing: %w", w.RoutingOutput, ErrNoRoute)
	}
	route, ok := raw.(string)
	if !ok {
		return "", fmt.Errorf("contracts: route: output %q is not a string: %w", w.RoutingOutput, ErrNoRoute)
	}
	for _, r := range w.Routes() {
		if r == route {
			return route, nil
		}
	}
	// The value is not echoed: routes are normal, but a malformed payload
	// could carry anything in that slot.
	return "", fmt.Errorf("contracts: route: output %q is not one of the declared routes: %w", w.RoutingOutput, ErrNoRoute)
}

// Routes returns the routing output's choice values in declared order, or
// nil when the working copy does not route.
func (w Working) Routes() []string {
	if w.RoutingOutput == "" {
		return nil
	}
	f, ok := find(w.Outputs.Fields, w.RoutingOutput)
	if !ok || f.Type != TypeChoice || len(f.Values) == 0 {
		return nil
	}
	return append([]string(nil), f.Values...)
}
