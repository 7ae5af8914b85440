// @metamask/smart-accounts-kit sends usage analytics unless DO_NOT_TRACK (or CI) is set; it checks at its first
// call, so setting it when the chain kit loads is early enough. Local chains never report anywhere.
process.env.DO_NOT_TRACK ??= '1';
