//! What a hickory error means for Tidings: no data, no such name, no answer in time, or a
//! failure with a reason the customer reading the record's `error` can act on. The one
//! place that reads hickory's error types.

use hickory_resolver::net::{DnsError as HickoryDnsError, NetError, NoRecords};
use hickory_resolver::proto::op::ResponseCode;
use tidings_core::ports::DnsError;

/// A failed hickory lookup, classified.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// NOERROR without records of the type asked for (NODATA): the name exists.
    NoData,
    /// Anything else.
    Error(DnsError),
}

/// Said when the fault is ours (our resolver), so the customer does not go hunting through
/// their zone for a problem that is not there.
const NOT_YOUR_RECORDS: &str =
    "this is a problem with the DNS resolver Tidings uses, not with your records; try again later";

/// Classifies the error of the lookup of `name`.
pub(crate) fn classify(name: &str, error: &NetError) -> Outcome {
    let failed = |reason: String| Outcome::Error(DnsError::Failed { name: name.to_owned(), reason });
    match error {
        NetError::Dns(HickoryDnsError::NoRecordsFound(NoRecords { response_code, .. })) => {
            if *response_code == ResponseCode::NXDomain {
                Outcome::Error(DnsError::NxDomain(name.to_owned()))
            } else {
                Outcome::NoData
            }
        }
        NetError::Timeout => Outcome::Error(DnsError::Timeout(name.to_owned())),
        NetError::Dns(HickoryDnsError::ResponseCode(ResponseCode::ServFail)) => failed(
            "the DNS resolver answered SERVFAIL: it could not get an answer from the domain's name servers \
             (they may be unreachable, lame or misconfigured, or DNSSEC validation failed); check the domain's \
             NS records and DNSSEC (DS) setup at your registrar and DNS provider, then try again"
                .to_owned(),
        ),
        NetError::Dns(HickoryDnsError::ResponseCode(ResponseCode::Refused)) => {
            failed(format!("the DNS resolver refused the query (REFUSED); {NOT_YOUR_RECORDS}"))
        }
        NetError::Dns(HickoryDnsError::ResponseCode(code)) => {
            failed(format!("the DNS resolver answered {code} ({}); {NOT_YOUR_RECORDS}", u16::from(*code)))
        }
        NetError::Dns(HickoryDnsError::DnssecBogus) => {
            failed("DNSSEC validation of the answer failed; check the domain's DNSSEC (DS and DNSKEY) setup".to_owned())
        }
        NetError::Io(io) => failed(format!("could not reach the DNS resolver ({io}); {NOT_YOUR_RECORDS}")),
        NetError::NoConnections | NetError::Busy => {
            failed(format!("could not reach the DNS resolver ({error}); {NOT_YOUR_RECORDS}"))
        }
        NetError::Truncated => failed(
            "the DNS answer is too large to receive even over TCP; publish fewer or shorter records at this name"
                .to_owned(),
        ),
        NetError::Proto(proto) => failed(format!("the DNS answer could not be read ({proto}); {NOT_YOUR_RECORDS}")),
        other => failed(format!("{other}; {NOT_YOUR_RECORDS}")),
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::Arc;

    use hickory_resolver::proto::op::Query;

    use super::*;

    fn no_records(code: ResponseCode) -> NetError {
        NetError::Dns(HickoryDnsError::NoRecordsFound(NoRecords::new(Query::default(), code)))
    }

    fn reason(outcome: Outcome) -> String {
        match outcome {
            Outcome::Error(DnsError::Failed { name, reason }) => {
                assert_eq!(name, "example.com");
                reason
            }
            other => panic!("expected Failed, got {other:?}"),
        }
    }

    #[test]
    fn negative_answers_are_nxdomain_or_nodata() {
        assert_eq!(
            classify("example.com", &no_records(ResponseCode::NXDomain)),
            Outcome::Error(DnsError::NxDomain("example.com".into()))
        );
        assert_eq!(classify("example.com", &no_records(ResponseCode::NoError)), Outcome::NoData);
    }

    #[test]
    fn a_timeout_is_a_timeout() {
        assert_eq!(
            classify("example.com", &NetError::Timeout),
            Outcome::Error(DnsError::Timeout("example.com".into()))
        );
    }

    #[test]
    fn failures_say_whose_problem_it_is() {
        let servfail = NetError::Dns(HickoryDnsError::ResponseCode(ResponseCode::ServFail));
        assert!(reason(classify("example.com", &servfail)).contains("NS records"));
        let refused = NetError::Dns(HickoryDnsError::ResponseCode(ResponseCode::Refused));
        assert!(reason(classify("example.com", &refused)).contains("not with your records"));
        let io = NetError::Io(Arc::new(io::Error::from(io::ErrorKind::ConnectionRefused)));
        assert!(reason(classify("example.com", &io)).starts_with("could not reach the DNS resolver"));
    }
}
