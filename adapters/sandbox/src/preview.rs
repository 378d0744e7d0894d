//! Where a Sandbox's app is reached from the host: the container's address on the Sandbox
//! network. Only the host (and the other Sandboxes on that internal network) can reach it; the
//! browser pool fetches the preview from there.

use crate::{SandboxError, Sandboxes, container_name};

impl Sandboxes {
    /// The project's container's address on the Sandbox network (the container must be live).
    pub async fn address(&self, project_id: &str) -> Result<String, SandboxError> {
        let name = container_name(project_id)?;
        let found = self.docker.inspect_container(&name, None).await?;
        found
            .network_settings
            .and_then(|n| n.networks)
            .and_then(|mut n| n.remove(&self.config.network))
            .and_then(|e| e.ip_address)
            .filter(|ip| !ip.is_empty())
            .ok_or_else(|| {
                SandboxError::InvalidConfig(format!("{name} has no address on the network {}", self.config.network))
            })
    }
}
