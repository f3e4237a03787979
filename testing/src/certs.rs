//! The certificates kube-apiserver needs: a CA, a serving certificate for 127.0.0.1
//! signed by it, and a service-account signing key pair.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};

use crate::HarnessError;

/// Paths of the files written.
#[derive(Debug, Clone)]
pub struct Certificates {
    /// The CA certificate clients trust.
    pub ca: PathBuf,
    /// kube-apiserver's serving certificate.
    pub serving_cert: PathBuf,
    /// Its key.
    pub serving_key: PathBuf,
    /// The service-account signing key.
    pub sa_key: PathBuf,
    /// Its public half.
    pub sa_pub: PathBuf,
}

fn cert_error(e: rcgen::Error) -> HarnessError {
    HarnessError::Certificate(e.to_string())
}

impl Certificates {
    /// Makes fresh keys and certificates and writes them into `dir`.
    pub fn write(dir: &Path) -> Result<Certificates, HarnessError> {
        let ca_key = KeyPair::generate().map_err(cert_error)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(cert_error)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "test control plane CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(cert_error)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let key = KeyPair::generate().map_err(cert_error)?;
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).map_err(cert_error)?;
        params.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &issuer).map_err(cert_error)?;

        let sa = KeyPair::generate().map_err(cert_error)?;
        let out = Certificates {
            ca: dir.join("ca.crt"),
            serving_cert: dir.join("serving.crt"),
            serving_key: dir.join("serving.key"),
            sa_key: dir.join("sa.key"),
            sa_pub: dir.join("sa.pub"),
        };
        for (path, text) in [
            (&out.ca, ca_cert.pem()),
            (&out.serving_cert, cert.pem()),
            (&out.serving_key, key.serialize_pem()),
            (&out.sa_key, sa.serialize_pem()),
            (&out.sa_pub, sa.public_key_pem()),
        ] {
            std::fs::write(path, text)
                .map_err(|e| HarnessError::Io(format!("failed to write {}", path.display()), e))?;
        }
        Ok(out)
    }
}
