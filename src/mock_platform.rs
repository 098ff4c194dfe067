//! A loopback chat platform that speaks the QQ Bot / Discord gateway protocol, with fault
//! switches. Used by the tests, the benchmarks and `hermes-svc demo`.
