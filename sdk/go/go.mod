module kshard.io/sdk/go

go 1.22
