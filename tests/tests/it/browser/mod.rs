//! The dashboard in a real browser: headless Chromium driven through
//! chromedriver ([`tidings_e2e::browser`]) against the real `tidings-server` binary, on the
//! routes and DOM hooks of docs/dashboard.md (`form#sign-in`, `nav#nav`,
//! `#status[data-status]`, `table#records`, `#new-key`, …).
//!
//! Every test starts its own server (outbox transport, a DNS server on loopback for domain
//! checks) and its own browser, so each stands alone and may run in parallel with the others.
//! A missing Chromium or chromedriver fails them, saying what to install.
//!
//! `TIDINGS_SCREENSHOTS=<dir>` makes [`screenshots`] write a PNG of every main page at
//! 1280 and 390 CSS pixels wide into `<dir>` (docs/screenshots/ holds the committed ones).

mod dashboard;

mod accessibility;
mod fit_and_contrast;
mod harness;
mod hostile_mail;
mod inbound_page;
mod keys_and_domains;
mod message_page;
mod messages;
mod operator;
mod overview;
mod recipients;
mod screenshots;
mod search;
mod sessions;
