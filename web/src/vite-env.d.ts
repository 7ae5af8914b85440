/// <reference types="vite/client" />

interface ImportMetaEnv {
  /** JSON-RPC of the local chain when the gateway does not publish it. */
  readonly VITE_LOCAL_RPC_URL?: string;
}
