//! Other providers' APIs served beside Tidings' own, so that an application written for them
//! switches by changing a base URL and a key (contract §11). Each is a translation over the
//! same use cases as `/v1`: its request shapes into core's requests, core's answers and
//! errors into its response shapes. No rule lives here.

pub(crate) mod resend;
