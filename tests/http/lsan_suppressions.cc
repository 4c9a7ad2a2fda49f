// LeakSanitizer suppressions for the transport tests. OpenSSL keeps per-thread state (its error
// queue) for every thread that touched TLS, and frees it only when that thread exits; the TLS
// tests run on cpprestsdk's process-wide pool, whose threads live until the process ends, so
// that state is reported at exit. Allocations made inside libcrypto are excluded for that reason.
extern "C" const char* __lsan_default_suppressions() { return "leak:libcrypto.so\n"; }
