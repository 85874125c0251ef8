//! Why a measurement, an emulated execution or an import failed.

use servesim_kernels::cuda::{CudaUnavailable, GpuError};

#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// No GPU could be opened (the message says what is missing).
    #[error(transparent)]
    Unavailable(#[from] CudaUnavailable),
    /// A CUDA call on the open GPU failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// The backend or executor cannot run this: a shape too large for the device, a size its
    /// kernels were not compiled for, an op it does not time, a call out of order.
    #[error("{0}")]
    Unsupported(String),
    /// An input file (a Vidur profiling CSV) is not what the importer reads: file, line, why.
    #[error("{0}")]
    Input(String),
}

impl Error {
    pub(crate) fn unsupported(msg: impl Into<String>) -> Error {
        Error::Unsupported(msg.into())
    }
}
