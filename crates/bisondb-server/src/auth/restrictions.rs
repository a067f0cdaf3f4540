//! `authenticationRestrictions` of users and roles, as mongod enforces
//! them: each is a list of documents `{clientSource: [...], serverAddress:
//! [...]}` of IP addresses and CIDR ranges. A list is met when it is empty
//! or when one of its documents is: the client's address is in its
//! `clientSource` and the address the client connected to in its
//! `serverAddress` (a field left out allows any). A user authenticates only
//! when its own list and the list of every role it holds (inherited ones
//! included) are met; otherwise 18 AuthenticationFailed, the one answer of
//! a failed login. A connection over the Unix socket has no IP address: a
//! list that names any address is not met by it.

use std::net::IpAddr;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};

/// An IP address or a CIDR range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cidr {
    ip: IpAddr,
    bits: u8,
}

impl Cidr {
    /// Reads `1.2.3.4`, `10.0.0.0/8`, `::1` or `fe80::/10`.
    pub fn parse(s: &str) -> Option<Cidr> {
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b.parse::<u8>().ok()?)),
            None => (s, None),
        };
        let ip: IpAddr = addr.parse().ok()?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let bits = bits.unwrap_or(max);
        (bits <= max).then_some(Cidr { ip, bits })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.ip, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => prefix_eq(
                u128::from(u32::from(net)),
                u128::from(u32::from(a)),
                32,
                self.bits,
            ),
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                prefix_eq(u128::from(net), u128::from(a), 128, self.bits)
            }
            _ => false,
        }
    }
}

fn prefix_eq(a: u128, b: u128, width: u32, bits: u8) -> bool {
    let bits = u32::from(bits);
    if bits == 0 {
        return true;
    }
    let shift = width - bits;
    (a >> shift) == (b >> shift)
}

/// One restriction document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restriction {
    client_source: Option<Vec<Cidr>>,
    server_address: Option<Vec<Cidr>>,
}

impl Restriction {
    fn met(&self, client: Option<IpAddr>, server: Option<IpAddr>) -> bool {
        let ok = |list: &Option<Vec<Cidr>>, ip: Option<IpAddr>| match list {
            None => true,
            Some(l) => ip.is_some_and(|ip| l.iter().any(|c| c.contains(ip))),
        };
        ok(&self.client_source, client) && ok(&self.server_address, server)
    }
}

fn addresses(field: &str, v: &Bson) -> MongoResult<Vec<Cidr>> {
    let one = |s: &Bson| {
        match s {
        Bson::String(s) => Cidr::parse(s).ok_or_else(|| {
            MongoError::new(
                ErrorCode::BadValue,
                format!("'{s}' in authenticationRestrictions.{field} is not a valid IP address or CIDR range"),
            )
        }),
        other => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "authenticationRestrictions.{field} must hold strings, found {}",
                crate::fields::type_name(other.element_type())
            ),
        )),
    }
    };
    match v {
        Bson::Array(a) => a.iter().map(one).collect(),
        s @ Bson::String(_) => Ok(vec![one(s)?]),
        other => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "authenticationRestrictions.{field} must be an array of strings, found {}",
                crate::fields::type_name(other.element_type())
            ),
        )),
    }
}

/// Reads (and so validates) an `authenticationRestrictions` value as
/// `createUser`, `updateUser`, `createRole` and `updateRole` take it.
pub fn parse(v: &Bson) -> MongoResult<Vec<Restriction>> {
    let Bson::Array(list) = v else {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "authenticationRestrictions must be an array, found {}",
                crate::fields::type_name(v.element_type())
            ),
        ));
    };
    list.iter()
        .map(|d| {
            let Bson::Document(d) = d else {
                return Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    "authenticationRestrictions must be an array of documents",
                ));
            };
            let mut r = Restriction::default();
            for (k, v) in d {
                match k.as_str() {
                    "clientSource" => r.client_source = Some(addresses(k, v)?),
                    "serverAddress" => r.server_address = Some(addresses(k, v)?),
                    other => {
                        return Err(MongoError::new(
                            ErrorCode::BadValue,
                            format!("Unknown field '{other}' in authenticationRestrictions: only clientSource and serverAddress are allowed"),
                        ))
                    }
                }
            }
            Ok(r)
        })
        .collect()
}

/// The restrictions a stored user or role document carries (none when the
/// field is absent; a stored value that no longer parses restricts
/// everything, so a damaged document never opens a door).
pub fn of_document(d: &Document) -> Vec<Restriction> {
    match d.get("authenticationRestrictions") {
        None => Vec::new(),
        Some(v) => parse(v).unwrap_or_else(|_| {
            vec![Restriction {
                client_source: Some(Vec::new()),
                server_address: None,
            }]
        }),
    }
}

/// Whether a list is met by a client at `client` connected to `server`.
pub fn met(list: &[Restriction], client: Option<IpAddr>, server: Option<IpAddr>) -> bool {
    list.is_empty() || list.iter().any(|r| r.met(client, server))
}

/// The client's IP address from the connection's peer (`ip:port`; `None`
/// over the Unix socket).
pub fn peer_ip(peer: &str) -> Option<IpAddr> {
    peer.parse::<std::net::SocketAddr>().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn cidr_ranges() {
        let c = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(c.contains("10.1.200.3".parse().unwrap()));
        assert!(!c.contains("10.2.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.1.0.9".parse().unwrap()));
        assert!(Cidr::parse("127.0.0.1")
            .unwrap()
            .contains("127.0.0.1".parse().unwrap()));
        assert!(!Cidr::parse("127.0.0.1")
            .unwrap()
            .contains("127.0.0.2".parse().unwrap()));
        assert!(Cidr::parse("::1").unwrap().contains("::1".parse().unwrap()));
        assert!(Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert!(Cidr::parse("fe80::/10")
            .unwrap()
            .contains("fe80::1".parse().unwrap()));
        for bad in ["10.0.0.0/33", "::/129", "nope", "1.2.3.4/x", ""] {
            assert_eq!(Cidr::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_list_is_met_by_any_of_its_documents() {
        let list = parse(&bson::Bson::Array(vec![
            doc! {"clientSource": ["192.168.0.0/24"], "serverAddress": ["10.0.0.1"]}.into(),
            doc! {"clientSource": ["127.0.0.1"]}.into(),
        ]))
        .unwrap();
        assert!(met(&list, ip("127.0.0.1"), ip("127.0.0.1")));
        assert!(met(&list, ip("192.168.0.7"), ip("10.0.0.1")));
        assert!(!met(&list, ip("192.168.0.7"), ip("10.0.0.2")));
        assert!(!met(&list, ip("10.9.9.9"), ip("10.0.0.1")));
        assert!(!met(&list, None, None), "the Unix socket has no address");
        assert!(met(&[], None, None));
    }

    #[test]
    fn bad_restrictions_are_refused() {
        for (v, code) in [
            (bson::Bson::Int32(1), 14),
            (bson::Bson::Array(vec![bson::Bson::Int32(1)]), 14),
            (
                bson::Bson::Array(vec![doc! {"clientSource": ["300.1.1.1"]}.into()]),
                2,
            ),
            (
                bson::Bson::Array(vec![doc! {"clientSource": [1]}.into()]),
                14,
            ),
            (
                bson::Bson::Array(vec![doc! {"nearby": ["1.1.1.1"]}.into()]),
                2,
            ),
        ] {
            let e = parse(&v).unwrap_err();
            assert_eq!(e.code.code(), code, "{v}: {e:?}");
        }
    }
}
