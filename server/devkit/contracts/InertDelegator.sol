// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/**
 * For tests of the gateway's payment checks: a "delegator" that accepts any signature (ERC-1271)
 * and executes nothing when the DelegationManager redeems a delegation from it, so the redemption
 * succeeds while no token moves. A gateway that took a successful redemption for a payment would
 * serve it for free.
 */
contract InertDelegator {
    function isValidSignature(bytes32, bytes calldata) external pure returns (bytes4) {
        return 0x1626ba7e;
    }

    function executeFromExecutor(bytes32, bytes calldata) external payable returns (bytes[] memory results) {
        results = new bytes[](0);
    }
}
