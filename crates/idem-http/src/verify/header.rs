//! The headers a scheme reads, and reading the one value of each as text.

use std::borrow::Cow;

use http::HeaderMap;

use super::VerifyError;

/// A header a scheme reads: its name as the sender's documentation spells it (looked up in any
/// case), and the shape its value should have, for error messages.
#[derive(Debug, Clone)]
pub(crate) struct HeaderSpec {
    pub(crate) name: Cow<'static, str>,
    pub(crate) expected: Cow<'static, str>,
}

impl HeaderSpec {
    pub(crate) const fn new(name: &'static str, expected: &'static str) -> Self {
        Self {
            name: Cow::Borrowed(name),
            expected: Cow::Borrowed(expected),
        }
    }

    /// The single value of this header as text. Errors: [`VerifyError::MissingHeader`] when
    /// absent, [`VerifyError::RepeatedHeader`] when sent more than once,
    /// [`VerifyError::MalformedHeader`] when the value is not visible ASCII.
    pub(crate) fn single<'h>(&self, headers: &'h HeaderMap) -> Result<&'h str, VerifyError> {
        let mut values = headers.get_all(self.name.as_ref()).iter();
        let value = values.next().ok_or_else(|| VerifyError::MissingHeader {
            header: self.name.clone(),
        })?;
        let more = values.count();
        if more > 0 {
            return Err(VerifyError::RepeatedHeader {
                header: self.name.clone(),
                count: more + 1,
            });
        }
        value
            .to_str()
            .map_err(|_| self.malformed("the value is not visible ASCII"))
    }

    /// [`VerifyError::MalformedHeader`] for this header, with `problem`.
    pub(crate) fn malformed(&self, problem: &'static str) -> VerifyError {
        VerifyError::MalformedHeader {
            header: self.name.clone(),
            problem,
            expected: self.expected.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    const SPEC: HeaderSpec = HeaderSpec::new("X-Signature", "<hex>");

    #[test]
    fn finds_the_value_whatever_the_case_of_the_name() {
        let mut headers = HeaderMap::new();
        headers.insert("x-signature", HeaderValue::from_static("ab"));
        assert_eq!(SPEC.single(&headers), Ok("ab"));
    }

    #[test]
    fn missing_repeated_and_binary_values_are_errors() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            SPEC.single(&headers).unwrap_err().to_string(),
            "missing header `X-Signature`"
        );
        headers.append("x-signature", HeaderValue::from_static("ab"));
        headers.append("x-signature", HeaderValue::from_static("cd"));
        assert_eq!(
            SPEC.single(&headers).unwrap_err().to_string(),
            "header `X-Signature` appears 2 times; expected it once"
        );
        let mut headers = HeaderMap::new();
        let binary =
            HeaderValue::from_bytes(b"\xff\xfe").expect("obs-text is a valid header value");
        headers.insert("x-signature", binary);
        assert_eq!(
            SPEC.single(&headers).unwrap_err().to_string(),
            "header `X-Signature` is malformed: the value is not visible ASCII; expected `<hex>`"
        );
    }
}
