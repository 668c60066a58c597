//! Why a call to the coordinator got no answer: unreachable (no answer in time, which the
//! caller meets with the no-manager rule) or refused (the coordinator said no).

use tonic::{Code, Status};

/// Why a call did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No answer in time, or the coordinator is not there.
    #[error("coordinator unreachable: {0}")]
    Unreachable(String),
    /// The coordinator answered with an error.
    #[error("coordinator refused the call: {code:?}: {message}")]
    Refused {
        /// The gRPC status code.
        code: Code,
        /// Its message.
        message: String,
    },
}

impl CallError {
    pub(crate) fn from_status(s: Status) -> Self {
        match s.code() {
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
                CallError::Unreachable(s.message().to_owned())
            }
            code => CallError::Refused {
                code,
                message: s.message().to_owned(),
            },
        }
    }

    /// True when the coordinator does not know the job (it restarted and lost the
    /// registration, for example).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            CallError::Refused {
                code: Code::NotFound,
                ..
            }
        )
    }

    /// True when the coordinator refused this process because another live process holds its
    /// executor id or the job (FAILED_PRECONDITION), or another executor registered the same
    /// job name (ALREADY_EXISTS): this process must run none of those jobs.
    pub fn is_held_elsewhere(&self) -> bool {
        matches!(
            self,
            CallError::Refused {
                code: Code::FailedPrecondition | Code::AlreadyExists,
                ..
            }
        )
    }

    /// True when the coordinator did not answer at all.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, CallError::Unreachable(_))
    }
}
