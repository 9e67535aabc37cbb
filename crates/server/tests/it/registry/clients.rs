//! Real clients (skopeo) against a real socket.
