module kshard.local/e2e/support

go 1.24.0
