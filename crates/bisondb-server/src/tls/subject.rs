//! A certificate's subject as mongod names an X.509 user: the RFC 2253 string
//! (most specific RDN first, `,` between RDNs, `+` inside a multi-valued one,
//! OpenSSL's short attribute names, RFC 2253 escaping).

use x509_cert::der::asn1::{Ia5StringRef, PrintableStringRef, TeletexStringRef, Utf8StringRef};
use x509_cert::der::{Decode, Encode, Tag, Tagged};

/// The subject of the DER certificate `der` in RFC 2253 form, or `None` when
/// the certificate cannot be parsed.
pub fn subject_rfc2253(der: &[u8]) -> Option<String> {
    let cert = x509_cert::Certificate::from_der(der).ok()?;
    Some(name_rfc2253(&cert.tbs_certificate.subject))
}

/// An RDN sequence in RFC 2253 form.
pub fn name_rfc2253(name: &x509_cert::name::Name) -> String {
    let mut out = String::new();
    for (i, rdn) in name.0.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, atv) in rdn.0.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            write_atv(&mut out, atv);
        }
    }
    out
}

/// OpenSSL's short names for the attribute types certificates use.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.42" => "GN",
        "2.5.4.43" => "initials",
        "2.5.4.44" => "generationQualifier",
        "2.5.4.46" => "dnQualifier",
        "2.5.4.65" => "pseudonym",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.2.840.113549.1.9.1" => "emailAddress",
        _ => return None,
    })
}

fn write_atv(out: &mut String, atv: &x509_cert::attr::AttributeTypeAndValue) {
    let oid = atv.oid.to_string();
    let value = &atv.value;
    let text = match value.tag() {
        Tag::PrintableString => PrintableStringRef::try_from(value)
            .ok()
            .map(|s| s.as_str().to_string()),
        Tag::Utf8String => Utf8StringRef::try_from(value)
            .ok()
            .map(|s| s.as_str().to_string()),
        Tag::Ia5String => Ia5StringRef::try_from(value)
            .ok()
            .map(|s| s.as_str().to_string()),
        Tag::TeletexString => TeletexStringRef::try_from(value)
            .ok()
            .map(|s| s.as_str().to_string()),
        _ => None,
    };
    match (short_name(&oid), text) {
        (Some(key), Some(text)) => {
            out.push_str(key);
            out.push('=');
            escape_into(out, &text);
        }
        // RFC 2253 2.4: a type without a name, or a value of another string
        // type, is the dotted OID and `#` with the hex of the value's DER.
        (key, _) => {
            out.push_str(key.unwrap_or(&oid));
            out.push_str("=#");
            for b in value.to_der().unwrap_or_default() {
                out.push_str(&format!("{b:02X}"));
            }
        }
    }
}

fn escape_into(out: &mut String, value: &str) {
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        match c {
            '#' | ' ' if i == 0 => {
                out.push('\\');
                out.push(c);
            }
            ' ' if i == last => out.push_str("\\ "),
            ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc2253_order_and_escaping() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "US");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc");
        dn.push(rcgen::DnType::OrganizationalUnitName, "Eng");
        dn.push(rcgen::DnType::CommonName, "client one");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(
            subject_rfc2253(cert.der()).unwrap(),
            "CN=client one,OU=Eng,O=Acme\\, Inc,C=US"
        );
        assert_eq!(subject_rfc2253(b"not a certificate"), None);
    }
}
