//! idem-verify's integration tests: the engine against small handlers served in the test.

mod duplicate_answers;
