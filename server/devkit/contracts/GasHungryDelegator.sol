// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/**
 * For tests of the gateway's gas bound: a "delegator" whose signature check (ERC-1271) accepts any
 * signature after burning gas for `rounds` hashes, so that redeeming a delegation from it costs the
 * gateway's relayer as much gas as the account's owner chose. It executes nothing.
 */
contract GasHungryDelegator {
    uint256 private immutable rounds;

    constructor(uint256 rounds_) {
        rounds = rounds_;
    }

    function isValidSignature(bytes32 hash, bytes calldata) external view returns (bytes4) {
        bytes32 burnt = hash;
        for (uint256 i = 0; i < rounds; i++) burnt = keccak256(abi.encodePacked(burnt));
        return burnt == bytes32(0) ? bytes4(0) : bytes4(0x1626ba7e);
    }

    function executeFromExecutor(bytes32, bytes calldata) external payable returns (bytes[] memory results) {
        results = new bytes[](0);
    }
}
