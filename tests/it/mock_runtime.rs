//! The loopback mock platform inside a test process, for the tests that point a real gateway at
//! it: the mock needs a runtime of its own that outlives the test's use of it.

use hermes_svc::mock_platform::{MockConfig, MockPlatform};

/// The runtime the mock platform lives on; it must outlive the test's use of the mock.
pub(crate) fn mock_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) fn start_mock(rt: &tokio::runtime::Runtime, config: MockConfig) -> MockPlatform {
    rt.block_on(MockPlatform::start(config))
        .expect("mock platform starts")
}
