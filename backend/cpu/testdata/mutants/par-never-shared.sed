# file: internal/par/par.go
# test: go test -count=1 -run TestSharedStopsPolling ./internal/par
# The pool never marks its cores shared: it keeps polling where its
# threads are descheduled. TestSharedStopsPolling must fail.
s/p\.shared\.Store(time\.Now()\.Add(sharedFor)\.UnixNano())/_ = sharedFor/
