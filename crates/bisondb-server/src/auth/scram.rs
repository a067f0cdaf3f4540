//! SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802 / RFC 7677) as mongod speaks them:
//! the stored credentials (`storedKey`, `serverKey`, salt, iteration count;
//! never the password) and the server's side of one conversation, driven by
//! `saslStart` and `saslContinue` (or `hello`'s `speculativeAuthenticate`).
//!
//! SCRAM-SHA-1 hashes mongod's password digest, `hex(md5("user:mongo:pwd"))`,
//! as the drivers do; SCRAM-SHA-256 hashes the SASLprep'd password. The
//! client's proof is compared in constant time. Every failure after the user
//! is known reads "Authentication failed.", whatever was wrong.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use hmac::{Hmac, KeyInit, Mac};
use md5::Digest as _;
use rand::RngCore;
use subtle::ConstantTimeEq;

/// A SCRAM mechanism BisonDB offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Sha1,
    Sha256,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "SCRAM-SHA-1" => Some(Mechanism::Sha1),
            "SCRAM-SHA-256" => Some(Mechanism::Sha256),
            _ => None,
        }
    }

    /// mongod's salt length: the hash's length less four bytes.
    fn salt_len(self) -> usize {
        match self {
            Mechanism::Sha1 => 16,
            Mechanism::Sha256 => 28,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => sha1::Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => sha2::Sha256::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length, so `new_from_slice` cannot fail.
        match self {
            Mechanism::Sha1 => match Hmac::<sha1::Sha1>::new_from_slice(key) {
                Ok(mut m) => {
                    m.update(data);
                    m.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            },
            Mechanism::Sha256 => match Hmac::<sha2::Sha256>::new_from_slice(key) {
                Ok(mut m) => {
                    m.update(data);
                    m.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            },
        }
    }

    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                let mut out = [0u8; 20];
                pbkdf2::pbkdf2_hmac::<sha1::Sha1>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            Mechanism::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }

    /// What the mechanism hashes for `user`'s `password`: mongod's digest
    /// for SHA-1 (unless the client digested it already), the SASLprep'd
    /// password for SHA-256.
    pub fn prepare_password(
        self,
        user: &str,
        password: &str,
        digested: bool,
    ) -> MongoResult<String> {
        match self {
            Mechanism::Sha1 if digested => Ok(password.to_string()),
            Mechanism::Sha1 => Ok(password_digest(user, password)),
            Mechanism::Sha256 => stringprep::saslprep(password)
                .map(|p| p.into_owned())
                .map_err(|e| {
                    MongoError::bad_value(format!(
                        "Could not SASLPREP password for SCRAM-SHA-256: {e}"
                    ))
                }),
        }
    }
}

/// mongod's (and the drivers') SCRAM-SHA-1 password digest.
pub fn password_digest(user: &str, password: &str) -> String {
    let d = md5::Md5::digest(format!("{user}:mongo:{password}").as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// One mechanism's stored credential, as in `system.users`.
#[derive(Clone, Debug, PartialEq)]
pub struct Credential {
    pub iteration_count: i32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl Credential {
    /// A fresh credential (new random salt) for a prepared password
    /// ([`Mechanism::prepare_password`]).
    pub fn new(mech: Mechanism, prepared: &str, iterations: i32) -> Credential {
        let mut salt = vec![0u8; mech.salt_len()];
        rand::rng().fill_bytes(&mut salt);
        let salted =
            mech.salted_password(prepared.as_bytes(), &salt, iterations.max(1).unsigned_abs());
        let client_key = mech.hmac(&salted, b"Client Key");
        Credential {
            iteration_count: iterations,
            stored_key: mech.hash(&client_key),
            server_key: mech.hmac(&salted, b"Server Key"),
            salt,
        }
    }

    pub fn to_document(&self) -> bson::Document {
        bson::doc! {
            "iterationCount": self.iteration_count,
            "salt": B64.encode(&self.salt),
            "storedKey": B64.encode(&self.stored_key),
            "serverKey": B64.encode(&self.server_key),
        }
    }

    pub fn from_document(d: &bson::Document) -> Option<Credential> {
        let b = |k: &str| d.get_str(k).ok().and_then(|s| B64.decode(s).ok());
        Some(Credential {
            iteration_count: d.get_i32("iterationCount").ok()?,
            salt: b("salt")?,
            stored_key: b("storedKey")?,
            server_key: b("serverKey")?,
        })
    }
}

/// What the server awaits next in a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// The client-final message with its proof.
    ClientFinal,
    /// The empty message that ends the exchange (without `skipEmptyExchange`).
    Empty,
}

/// The server's side of one SCRAM conversation, kept by the connection
/// between `saslStart` and `saslContinue`.
#[derive(Clone, Debug)]
pub struct Conversation {
    pub mechanism: Mechanism,
    pub user: String,
    pub db: String,
    client_first_bare: String,
    server_first: String,
    gs2_header: String,
    nonce: String,
    credential: Credential,
    step: Step,
    skip_empty_exchange: bool,
}

/// What a step of the conversation answers.
pub struct StepReply {
    pub payload: Vec<u8>,
    pub done: bool,
}

pub fn auth_failed() -> MongoError {
    MongoError::new(ErrorCode::AuthenticationFailed, "Authentication failed.")
}

fn protocol(msg: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::BadValue, msg)
}

/// The SASL name escaping of RFC 5802 (`=2C` is `,`, `=3D` is `=`).
fn decode_sasl_name(s: &str) -> MongoResult<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(protocol("Invalid SCRAM user name: bad escape")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The user a client-first message names (read before the user's
/// credential is looked up).
pub fn client_first_user(payload: &[u8]) -> MongoResult<String> {
    Ok(parse_client_first(payload)?.user)
}

struct ClientFirst {
    gs2_header: String,
    bare: String,
    user: String,
    nonce: String,
}

fn parse_client_first(payload: &[u8]) -> MongoResult<ClientFirst> {
    let text = std::str::from_utf8(payload)
        .map_err(|_| protocol("SCRAM client-first message is not UTF-8"))?;
    let mut parts = text.splitn(3, ',');
    let cbind = parts.next().unwrap_or_default();
    let authzid = parts.next();
    let bare = parts.next();
    let (Some(authzid), Some(bare)) = (authzid, bare) else {
        return Err(protocol(format!(
            "Incorrect number of arguments for first SCRAM client message, got {} expected at least 3",
            text.split(',').count()
        )));
    };
    match cbind {
        "n" | "y" => {}
        c if c.starts_with("p=") => {
            return Err(protocol("Server does not support channel binding"))
        }
        _ => {
            return Err(protocol(format!(
                "Incorrect SCRAM client message prefix: {cbind}"
            )))
        }
    }
    let mut user = None;
    let mut nonce = None;
    for (i, attr) in bare.split(',').enumerate() {
        match (i, attr.split_at_checked(2)) {
            (0, Some(("n=", v))) => user = Some(decode_sasl_name(v)?),
            (1, Some(("r=", v))) => nonce = Some(v.to_string()),
            (0, _) => return Err(protocol("Invalid SCRAM user name")),
            (1, _) => return Err(protocol("Invalid SCRAM client nonce")),
            _ => return Err(protocol("SCRAM extensions are not supported")),
        }
    }
    let (Some(user), Some(nonce)) = (user, nonce) else {
        return Err(protocol("Invalid SCRAM client-first message"));
    };
    if nonce.is_empty() || user.is_empty() {
        return Err(protocol("Invalid SCRAM client-first message"));
    }
    if let Some(a) = authzid.strip_prefix("a=") {
        if decode_sasl_name(a)? != user {
            return Err(protocol(
                "SCRAM user name and authorization identity must be the same",
            ));
        }
    } else if !authzid.is_empty() {
        return Err(protocol("Invalid SCRAM authorization identity"));
    }
    Ok(ClientFirst {
        gs2_header: format!("{cbind},{authzid},"),
        bare: bare.to_string(),
        user,
        nonce,
    })
}

impl Conversation {
    /// The server-first message for a client-first one, given the named
    /// user's credential for this mechanism.
    pub fn start(
        mechanism: Mechanism,
        db: &str,
        payload: &[u8],
        credential: Credential,
        skip_empty_exchange: bool,
    ) -> MongoResult<(Conversation, Vec<u8>)> {
        let first = parse_client_first(payload)?;
        let mut server_nonce = [0u8; 24];
        rand::rng().fill_bytes(&mut server_nonce);
        let nonce = format!("{}{}", first.nonce, B64.encode(server_nonce));
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iteration_count
        );
        let reply = server_first.clone().into_bytes();
        Ok((
            Conversation {
                mechanism,
                user: first.user,
                db: db.to_string(),
                client_first_bare: first.bare,
                server_first,
                gs2_header: first.gs2_header,
                nonce,
                credential,
                step: Step::ClientFinal,
                skip_empty_exchange,
            },
            reply,
        ))
    }

    /// The next step: the client-final message (proof checked), then the
    /// empty one unless the client skips it. `Ok` with `done` means the
    /// user is authenticated.
    pub fn step(&mut self, payload: &[u8]) -> MongoResult<StepReply> {
        match self.step {
            Step::Empty => {
                if !payload.is_empty() {
                    return Err(auth_failed());
                }
                Ok(StepReply {
                    payload: Vec::new(),
                    done: true,
                })
            }
            Step::ClientFinal => {
                let server_final = self.check_client_final(payload)?;
                if self.skip_empty_exchange {
                    Ok(StepReply {
                        payload: server_final,
                        done: true,
                    })
                } else {
                    self.step = Step::Empty;
                    Ok(StepReply {
                        payload: server_final,
                        done: false,
                    })
                }
            }
        }
    }

    fn check_client_final(&self, payload: &[u8]) -> MongoResult<Vec<u8>> {
        let text = std::str::from_utf8(payload).map_err(|_| auth_failed())?;
        let Some((without_proof, proof)) = text.rsplit_once(",p=") else {
            return Err(auth_failed());
        };
        let mut attrs = without_proof.split(',');
        let cbind = attrs.next().and_then(|c| c.strip_prefix("c="));
        let nonce = attrs.next().and_then(|r| r.strip_prefix("r="));
        if attrs.next().is_some() {
            return Err(auth_failed());
        }
        // The channel binding repeats the gs2 header; the nonce must be this
        // conversation's (a message replayed from another one carries another).
        let cbind_ok = cbind
            .and_then(|c| B64.decode(c).ok())
            .is_some_and(|c| c == self.gs2_header.as_bytes());
        let nonce_ok = nonce.is_some_and(|r| bool::from(r.as_bytes().ct_eq(self.nonce.as_bytes())));
        let proof = B64.decode(proof).map_err(|_| auth_failed())?;
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let m = self.mechanism;
        let signature = m.hmac(&self.credential.stored_key, auth_message.as_bytes());
        let proof_ok = if proof.len() == signature.len() {
            let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
            bool::from(m.hash(&client_key).ct_eq(&self.credential.stored_key))
        } else {
            false
        };
        if !(cbind_ok && nonce_ok && proof_ok) {
            return Err(auth_failed());
        }
        let server_signature = m.hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

/// A client's side of SCRAM, for the tests (and the measurements): the
/// client-first message, then the client-final one for a server-first.
#[cfg(test)]
pub(crate) mod client {
    use super::*;

    pub fn first(user: &str, nonce: &str) -> String {
        format!("n,,n={user},r={nonce}")
    }

    pub fn final_message(
        mech: Mechanism,
        prepared_password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> String {
        let mut r = "";
        let mut s = "";
        let mut i = 0u32;
        for a in server_first.split(',') {
            match a.split_at(2) {
                ("r=", v) => r = v,
                ("s=", v) => s = v,
                ("i=", v) => i = v.parse().unwrap_or(1),
                _ => {}
            }
        }
        let salt = B64.decode(s).unwrap_or_default();
        let salted = mech.salted_password(prepared_password.as_bytes(), &salt, i);
        let client_key = mech.hmac(&salted, b"Client Key");
        let stored = mech.hash(&client_key);
        let without = format!("c=biws,r={r}");
        let auth = format!("{client_first_bare},{server_first},{without}");
        let sig = mech.hmac(&stored, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        format!("{without},p={}", B64.encode(proof))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example, and RFC 5802's SHA-1 one.
    #[test]
    fn rfc_examples() {
        for (mech, pwd, salt, iters, cnonce, snonce, server_first, client_final, server_final) in [
            (
                Mechanism::Sha256,
                "pencil",
                "W22ZaJ0SNY7soEsUEjb6gQ==",
                4096,
                "rOprNGfwEbeRWgbNEkqO",
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
                "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
            ),
            (
                Mechanism::Sha1,
                "pencil",
                "QSXCR+Q6sek8bf92",
                4096,
                "fyko+d2lbbFgONRv9qkxdawL",
                "3rfcNHYJY1ZVvWVs7j",
                "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
                "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
                "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
            ),
        ] {
            let salt = B64.decode(salt).unwrap_or_default();
            let salted = mech.salted_password(pwd.as_bytes(), &salt, iters);
            let client_key = mech.hmac(&salted, b"Client Key");
            let credential = Credential {
                iteration_count: iters as i32,
                salt,
                stored_key: mech.hash(&client_key),
                server_key: mech.hmac(&salted, b"Server Key"),
            };
            let bare = format!("n=user,r={cnonce}");
            let conv = Conversation {
                mechanism: mech,
                user: "user".into(),
                db: "admin".into(),
                client_first_bare: bare,
                server_first: server_first.into(),
                gs2_header: "n,,".into(),
                nonce: format!("{cnonce}{snonce}"),
                credential,
                step: Step::ClientFinal,
                skip_empty_exchange: true,
            };
            let got = conv.check_client_final(client_final.as_bytes());
            assert_eq!(got.ok(), Some(server_final.as_bytes().to_vec()), "{mech:?}");
            // One flipped proof bit fails.
            let tampered = client_final.replace("p=d", "p=e").replace("p=v", "p=w");
            assert!(conv.check_client_final(tampered.as_bytes()).is_err());
        }
    }

    #[test]
    fn a_whole_conversation_with_and_without_the_empty_exchange() {
        for skip in [true, false] {
            for mech in [Mechanism::Sha1, Mechanism::Sha256] {
                let prepared = mech
                    .prepare_password("ann", "secret", false)
                    .unwrap_or_default();
                let cred = Credential::new(mech, &prepared, 4096);
                let first = client::first("ann", "abcdefgh");
                let (mut conv, server_first) =
                    Conversation::start(mech, "admin", first.as_bytes(), cred, skip)
                        .unwrap_or_else(|e| panic!("{e:?}"));
                let server_first = String::from_utf8(server_first).unwrap_or_default();
                let fin = client::final_message(mech, &prepared, &first[3..], &server_first);
                let r = conv
                    .step(fin.as_bytes())
                    .unwrap_or_else(|e| panic!("{e:?}"));
                assert!(String::from_utf8_lossy(&r.payload).starts_with("v="));
                assert_eq!(r.done, skip);
                if !skip {
                    let r = conv.step(b"").unwrap_or_else(|e| panic!("{e:?}"));
                    assert!(r.done && r.payload.is_empty());
                }
            }
        }
    }

    #[test]
    fn malformed_client_first_messages_fail() {
        for bad in [
            "",
            "n,,",
            "p=tls-unique,,n=a,r=b",
            "x,,n=a,r=b",
            "n,,n=a",
            "n,,r=b,n=a",
            "n,a=b,n=a,r=c",
            "n,,n=a=4,r=b",
        ] {
            assert!(parse_client_first(bad.as_bytes()).is_err(), "{bad}");
        }
        let ok = parse_client_first(b"n,a=x=2Cy,n=x=2Cy,r=abc").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(ok.user, "x,y");
    }

    #[test]
    fn sha256_passwords_are_saslprepped() {
        // U+00AD (soft hyphen) maps to nothing; U+2168 (Roman nine) to "IX".
        let m = Mechanism::Sha256;
        assert_eq!(
            m.prepare_password("u", "I\u{00AD}X", false).ok(),
            Some("IX".into())
        );
        assert_eq!(
            m.prepare_password("u", "\u{2168}", false).ok(),
            Some("IX".into())
        );
        assert!(m.prepare_password("u", "a\u{0007}", false).is_err());
        assert_eq!(
            password_digest("user", "pencil"),
            "1c33006ec1ffd90f9cadcbcc0e118200"
        );
    }
}
