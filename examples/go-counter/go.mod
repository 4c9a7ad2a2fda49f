module kshard.io/examples/go-counter

go 1.22

require kshard.io/sdk/go v0.0.0-00010101000000-000000000000

// The SDK from this repository.
replace kshard.io/sdk/go => ../../sdk/go
