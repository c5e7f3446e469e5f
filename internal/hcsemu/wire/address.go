package wire

// DefaultAddress is the unix socket the hcsemu daemon listens on by default, and where the
// non-Windows client looks for it when $HCSEMU_ADDRESS is not set.
const DefaultAddress = "/run/hcsemu/hcsemu.sock"

// AddressEnv names the environment variable that overrides DefaultAddress for the client.
const AddressEnv = "HCSEMU_ADDRESS"
