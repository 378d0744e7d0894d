//! Where belay keeps its objects (source files and blobs, patches, run artifacts, check outputs,
//! screenshots, Evidence objects): `BELAY_OBJECT_STORE` names a directory (the embedded default,
//! `DATA_DIR/objects`), `file://PATH`, or `s3://BUCKET[/PREFIX]` on any S3-compatible store (AWS,
//! MinIO, R2, …) through the `object_store` crate's own S3 backend. The S3 endpoint, region,
//! credentials, addressing style and extra CA come from the usual AWS variables, read here once,
//! with the rest of the command's configuration, and handed to the backend.

use anyhow::Context;
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The object store's location and, for S3, how to reach it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ObjectStoreArgs {
    /// The object store: a directory, `file://PATH` or `s3://BUCKET[/PREFIX]` (default:
    /// DATA_DIR/objects).
    #[arg(long, env = "BELAY_OBJECT_STORE", num_args = 0..=1)]
    pub object_store: Option<String>,
    #[command(flatten)]
    pub s3: S3Args,
}

/// How to reach an `s3://` object store: the variables the AWS CLI and SDKs read. A variable set
/// but empty counts as unset (`num_args = 0..=1`), as it does for those tools.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct S3Args {
    /// The S3 endpoint (`https://…`; MinIO, R2 or any S3-compatible store), default AWS's for the
    /// region. AWS_ENDPOINT_URL_S3 takes precedence over AWS_ENDPOINT_URL. An `http://` endpoint
    /// is plain text, and only ever used when named so.
    #[arg(long = "s3-endpoint", env = "AWS_ENDPOINT_URL", num_args = 0..=1)]
    pub endpoint: Option<String>,
    #[arg(long = "s3-endpoint-s3", env = "AWS_ENDPOINT_URL_S3", hide = true, num_args = 0..=1)]
    pub endpoint_s3: Option<String>,
    /// The bucket's region (AWS_REGION, else AWS_DEFAULT_REGION; `us-east-1` when neither is set;
    /// R2 takes `auto`).
    #[arg(long = "s3-region", env = "AWS_REGION", num_args = 0..=1)]
    pub region: Option<String>,
    #[arg(long = "s3-default-region", env = "AWS_DEFAULT_REGION", hide = true, num_args = 0..=1)]
    pub default_region: Option<String>,
    /// The access key; without it (and the secret) the backend's own chain applies: web
    /// identity (AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN), then instance metadata.
    #[arg(long = "s3-access-key-id", env = "AWS_ACCESS_KEY_ID", num_args = 0..=1)]
    pub access_key_id: Option<String>,
    #[arg(long = "s3-secret-access-key", env = "AWS_SECRET_ACCESS_KEY", hide_env_values = true, num_args = 0..=1)]
    pub secret_access_key: Option<String>,
    #[arg(long = "s3-session-token", env = "AWS_SESSION_TOKEN", hide_env_values = true, num_args = 0..=1)]
    pub session_token: Option<String>,
    /// `true` for virtual-hosted-style requests (`https://BUCKET.endpoint/KEY`); path-style
    /// (`https://endpoint/BUCKET/KEY`, what MinIO and most S3-compatible stores want) by default.
    #[arg(long = "s3-virtual-hosted-style", env = "AWS_VIRTUAL_HOSTED_STYLE_REQUEST", num_args = 0..=1)]
    pub virtual_hosted_style: Option<String>,
    /// A PEM bundle of further CA certificates to trust for the S3 endpoint, besides the
    /// platform's roots (a private CA in front of MinIO, say).
    #[arg(long = "s3-ca-bundle", env = "AWS_CA_BUNDLE", num_args = 0..=1)]
    pub ca_bundle: Option<PathBuf>,
}

/// Where the objects are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Dir(PathBuf),
    S3 { bucket: String, prefix: String },
}

/// What `BELAY_OBJECT_STORE` may hold, for the one-line errors.
const FORMS: &str = "a directory, file:///ABSOLUTE/PATH or s3://BUCKET[/PREFIX]";

impl Location {
    /// Parses a `BELAY_OBJECT_STORE` value. Anything that starts like a URL (`scheme:`) is one:
    /// an unknown scheme is refused rather than taken for a directory named `s3:` or `gs:`.
    pub fn parse(value: &str) -> Result<Location, String> {
        let value = value.trim();
        let Some((scheme, rest)) = split_scheme(value) else {
            return Ok(Location::Dir(PathBuf::from(value)));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "file" => {
                let path = rest
                    .strip_prefix("//")
                    .ok_or_else(|| format!("BELAY_OBJECT_STORE {value:?}: a file URL is file:///ABSOLUTE/PATH"))?;
                let path = path.strip_prefix("localhost").unwrap_or(path);
                if !path.starts_with('/') {
                    return Err(format!(
                        "BELAY_OBJECT_STORE {value:?}: a file URL names an absolute path on this host (file:///ABSOLUTE/PATH)"
                    ));
                }
                Ok(Location::Dir(PathBuf::from(path)))
            }
            "s3" => {
                let rest = rest
                    .strip_prefix("//")
                    .ok_or_else(|| format!("BELAY_OBJECT_STORE {value:?}: an S3 location is s3://BUCKET[/PREFIX]"))?;
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                check_bucket(bucket).map_err(|why| format!("BELAY_OBJECT_STORE {value:?}: {why}"))?;
                let prefix = prefix.trim_matches('/');
                if prefix.split('/').any(|p| p.is_empty() || p == "." || p == "..") && !prefix.is_empty() {
                    return Err(format!(
                        "BELAY_OBJECT_STORE {value:?}: the prefix must be path segments without empty, . or .. parts"
                    ));
                }
                Ok(Location::S3 {
                    bucket: bucket.to_owned(),
                    prefix: prefix.to_owned(),
                })
            }
            other => Err(format!(
                "BELAY_OBJECT_STORE {value:?}: unknown scheme {other:?}; expected {FORMS}"
            )),
        }
    }
}

/// `(scheme, rest)` when `value` starts with an RFC 3986 scheme and a colon.
fn split_scheme(value: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = value.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c)))
        .then_some((scheme, rest))
}

/// S3's bucket naming rules (3–63 of lowercase letters, digits, dots and hyphens, starting and
/// ending with a letter or digit), which R2 and MinIO share.
fn check_bucket(bucket: &str) -> Result<(), String> {
    let ok_chars = bucket
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if (3..=63).contains(&bucket.len()) && ok_chars && ends(bucket.chars().next()) && ends(bucket.chars().last()) {
        Ok(())
    } else {
        Err(format!(
            "bucket {bucket:?} is not a bucket name (3 to 63 lowercase letters, digits, dots and hyphens)"
        ))
    }
}

impl ObjectStoreArgs {
    /// Where the objects are: `BELAY_OBJECT_STORE`, else `data_dir/objects`.
    pub fn location(&self, data_dir: &Path) -> anyhow::Result<Location> {
        match set(&self.object_store) {
            Some(value) => Location::parse(value).map_err(anyhow::Error::msg),
            None => Ok(Location::Dir(data_dir.join("objects"))),
        }
    }

    /// Opens the object store (a directory is created when missing). Refuses, with one line naming
    /// the variable, a value belay cannot use. An S3 endpoint's certificate is checked against the
    /// platform's roots, `extra_roots` (DER; the CA bundle every HTTPS client of the process
    /// trusts) and AWS_CA_BUNDLE.
    pub fn open(&self, data_dir: &Path, extra_roots: &[Vec<u8>]) -> anyhow::Result<Arc<dyn ObjectStore>> {
        match self.location(data_dir)? {
            Location::Dir(dir) => dir_store(&dir),
            Location::S3 { bucket, prefix } => {
                let s3 = self.s3.build(&bucket, extra_roots)?;
                Ok(if prefix.is_empty() {
                    Arc::new(s3)
                } else {
                    Arc::new(object_store::prefix::PrefixStore::new(s3, prefix.as_str()))
                })
            }
        }
    }
}

impl S3Args {
    /// The endpoint in force: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL.
    fn endpoint(&self) -> Option<&str> {
        set(&self.endpoint_s3).or(set(&self.endpoint))
    }

    /// The region in force: AWS_REGION, else AWS_DEFAULT_REGION.
    fn region(&self) -> Option<&str> {
        set(&self.region).or(set(&self.default_region))
    }

    /// The S3 backend for `bucket`, trusting `extra_roots` (DER) besides the platform's roots and
    /// AWS_CA_BUNDLE.
    pub fn build(&self, bucket: &str, extra_roots: &[Vec<u8>]) -> anyhow::Result<object_store::aws::AmazonS3> {
        let mut options = object_store::ClientOptions::new();
        for der in extra_roots {
            let cert = object_store::Certificate::from_der(der)
                .map_err(|e| anyhow::anyhow!("a CA certificate for the S3 endpoint is not DER ({e})"))?;
            options = options.with_root_certificate(cert);
        }
        let virtual_hosted = match set(&self.virtual_hosted_style).map(str::to_ascii_lowercase).as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => anyhow::bail!("AWS_VIRTUAL_HOSTED_STYLE_REQUEST {other:?}: expected true or false"),
        };
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_virtual_hosted_style_request(virtual_hosted);
        if let Some(endpoint) = self.endpoint() {
            let scheme = endpoint.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
            match scheme.as_deref() {
                Some("https") => {}
                // Plain text only where the operator wrote http:// (a MinIO on a private network).
                Some("http") => options = options.with_allow_http(true),
                _ => {
                    anyhow::bail!("AWS_ENDPOINT_URL {endpoint:?}: the S3 endpoint is https://HOST[:PORT] (or http://)")
                }
            }
            builder = builder.with_endpoint(endpoint.trim_end_matches('/'));
        }
        if let Some(region) = self.region() {
            builder = builder.with_region(region);
        }
        match (set(&self.access_key_id), set(&self.secret_access_key)) {
            (Some(id), Some(secret)) => {
                builder = builder.with_access_key_id(id).with_secret_access_key(secret);
                if let Some(token) = set(&self.session_token) {
                    builder = builder.with_token(token);
                }
            }
            (Some(_), None) => anyhow::bail!("AWS_SECRET_ACCESS_KEY is unset: AWS_ACCESS_KEY_ID needs its secret"),
            (None, Some(_)) => anyhow::bail!("AWS_ACCESS_KEY_ID is unset: AWS_SECRET_ACCESS_KEY needs its key id"),
            (None, None) => {}
        }
        if let Some(path) = self.ca_bundle.as_ref().filter(|p| !p.as_os_str().is_empty()) {
            let pem = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("AWS_CA_BUNDLE {}: cannot be read ({e})", path.display()))?;
            let certs = object_store::Certificate::from_pem_bundle(&pem)
                .map_err(|e| anyhow::anyhow!("AWS_CA_BUNDLE {}: not a PEM certificate bundle ({e})", path.display()))?;
            anyhow::ensure!(
                !certs.is_empty(),
                "AWS_CA_BUNDLE {}: holds no PEM certificate",
                path.display()
            );
            for cert in certs {
                options = options.with_root_certificate(cert);
            }
        }
        builder
            .with_client_options(options)
            .build()
            .map_err(|e| anyhow::anyhow!("BELAY_OBJECT_STORE s3://{bucket}: {e}"))
    }
}

/// A variable's value, `None` when unset or blank.
fn set(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// The filesystem store rooted at `dir`, created when missing.
pub fn dir_store(dir: &Path) -> anyhow::Result<Arc<dyn ObjectStore>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating the object store directory {}", dir.display()))?;
    Ok(Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_path_is_a_directory() {
        assert_eq!(
            Location::parse("/srv/objects"),
            Ok(Location::Dir("/srv/objects".into()))
        );
        assert_eq!(Location::parse("objects"), Ok(Location::Dir("objects".into())));
        assert_eq!(Location::parse("./s3:x"), Ok(Location::Dir("./s3:x".into())));
    }

    #[test]
    fn a_file_url_is_an_absolute_directory() {
        assert_eq!(Location::parse("file:///srv/o"), Ok(Location::Dir("/srv/o".into())));
        assert_eq!(
            Location::parse("file://localhost/srv/o"),
            Ok(Location::Dir("/srv/o".into()))
        );
        assert!(
            Location::parse("file://host/srv")
                .unwrap_err()
                .contains("absolute path")
        );
        assert!(Location::parse("file:relative").unwrap_err().contains("file:///"));
    }

    #[test]
    fn an_s3_url_names_its_bucket_and_prefix() {
        assert_eq!(
            Location::parse("s3://belay-objects"),
            Ok(Location::S3 {
                bucket: "belay-objects".into(),
                prefix: String::new()
            })
        );
        assert_eq!(
            Location::parse("s3://belay-objects/prod/eu/"),
            Ok(Location::S3 {
                bucket: "belay-objects".into(),
                prefix: "prod/eu".into()
            })
        );
    }

    #[test]
    fn a_bad_bucket_or_prefix_is_refused_naming_the_variable() {
        for bad in [
            "s3://",
            "s3://ab",
            "s3://Upper",
            "s3://under_score/x",
            "s3:bucket",
            "s3://b-ok/a//b",
            "s3://b-ok/../x",
        ] {
            let e = Location::parse(bad).unwrap_err();
            assert!(e.starts_with("BELAY_OBJECT_STORE"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_unknown_scheme_is_refused_not_taken_for_a_directory() {
        let e = Location::parse("gs://bucket/x").unwrap_err();
        assert_eq!(
            e,
            "BELAY_OBJECT_STORE \"gs://bucket/x\": unknown scheme \"gs\"; expected a directory, file:///ABSOLUTE/PATH or s3://BUCKET[/PREFIX]"
        );
        assert!(!e.contains('\n'));
        assert!(Location::parse("az:x").is_err());
    }

    #[test]
    fn the_s3_endpoint_and_region_follow_the_aws_precedence() {
        let args = S3Args {
            endpoint: Some("https://a.example".into()),
            endpoint_s3: Some("https://s3.example".into()),
            region: None,
            default_region: Some("eu-west-1".into()),
            ..Default::default()
        };
        assert_eq!(args.endpoint(), Some("https://s3.example"));
        assert_eq!(args.region(), Some("eu-west-1"));
    }

    #[test]
    fn an_empty_variable_counts_as_unset() {
        let args = ObjectStoreArgs {
            object_store: Some(" ".into()),
            s3: S3Args {
                ca_bundle: Some("".into()),
                virtual_hosted_style: Some("".into()),
                region: Some("".into()),
                access_key_id: Some("".into()),
                ..Default::default()
            },
        };
        assert_eq!(
            args.location(Path::new("/d")).unwrap(),
            Location::Dir("/d/objects".into())
        );
        args.s3.build("belay-objects", &[]).unwrap();
        let bad = S3Args {
            virtual_hosted_style: Some("yes please".into()),
            ..Default::default()
        };
        let e = bad.build("belay-objects", &[]).unwrap_err().to_string();
        assert!(e.starts_with("AWS_VIRTUAL_HOSTED_STYLE_REQUEST"), "{e}");
    }

    #[test]
    fn a_key_without_its_secret_is_refused() {
        let args = S3Args {
            access_key_id: Some("AKIA".into()),
            ..Default::default()
        };
        let e = args.build("belay-objects", &[]).unwrap_err().to_string();
        assert!(e.starts_with("AWS_SECRET_ACCESS_KEY is unset"), "{e}");
    }

    /// S3 over HTTPS with a private CA (moto's server, a CA made for the test): trusted through
    /// AWS_CA_BUNDLE or the process's CA bundle, refused without either.
    #[tokio::test]
    async fn s3_over_tls_trusts_a_configured_ca_and_nothing_else() {
        use crate::moto::{Moto, default_moto_server};
        let dir = tempfile::tempdir().unwrap();
        let moto = Moto::start(dir.path(), &default_moto_server(), "belay-objects").unwrap();
        let args = |ca_bundle: Option<PathBuf>| ObjectStoreArgs {
            object_store: Some(format!("s3://{}/t", moto.bucket)),
            s3: S3Args {
                endpoint: Some(moto.endpoint.clone()),
                access_key_id: Some("k".into()),
                secret_access_key: Some("s".into()),
                ca_bundle,
                ..Default::default()
            },
        };
        let key = object_store::path::Path::from("a/b.txt");
        let trusted = args(Some(moto.ca.clone())).open(dir.path(), &[]).unwrap();
        trusted.put(&key, b"hello".to_vec().into()).await.unwrap();
        let got = trusted.get(&key).await.unwrap().bytes().await.unwrap();
        assert_eq!(&got[..], b"hello");
        assert_eq!(
            moto.keys().unwrap(),
            vec!["t/a/b.txt".to_owned()],
            "under the prefix, in the bucket"
        );

        let der = std::process::Command::new("openssl")
            .args(["x509", "-outform", "DER", "-in"])
            .arg(&moto.ca)
            .output()
            .unwrap()
            .stdout;
        let through_the_process_bundle = args(None).open(dir.path(), &[der]).unwrap();
        let got = through_the_process_bundle
            .get(&key)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(&got[..], b"hello");

        let untrusted = args(None).open(dir.path(), &[]).unwrap();
        let e = untrusted.get(&key).await.unwrap_err();
        assert!(format!("{e:?}").to_lowercase().contains("certificate"), "{e:?}");
        assert!(!dir.path().join("objects").exists(), "nothing on the disk");
    }

    #[test]
    fn an_endpoint_that_is_not_http_is_refused() {
        let args = S3Args {
            endpoint: Some("minio:9000".into()),
            ..Default::default()
        };
        let e = args.build("belay-objects", &[]).unwrap_err().to_string();
        assert!(e.starts_with("AWS_ENDPOINT_URL"), "{e}");
    }
}
