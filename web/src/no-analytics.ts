// @metamask/smart-accounts-kit reports usage to MetaMask unless Do Not Track is on; it reads
// `window.doNotTrack` at its first call. The dashboard sends nothing anywhere but the gateway and the chain.
(window as Window & { doNotTrack?: string }).doNotTrack = '1';
