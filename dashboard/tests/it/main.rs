//! The dashboard's tests: one binary, one module per concern (STYLE.md). Every test drives
//! the API and dashboard routers merged as the server merges them, with real HTTP requests
//! over the in-memory store.

mod access;
mod asking_and_errors;
mod csrf;
mod escaping;
mod headers;
mod inbound;
mod operator;
mod overview;
mod pages;
mod sign_in;
mod support;
mod world;
