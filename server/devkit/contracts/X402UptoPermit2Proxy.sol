// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

/// @notice The part of Uniswap's Permit2 (SignatureTransfer) this proxy calls.
interface ISignatureTransfer {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external;
}

/// @title The x402 `upto` Permit2 proxy, as x402's clients and facilitators use it.
/// @notice x402's `upto` scheme names 0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002 as the Permit2 spender of every
/// payment; a bare anvil has nothing there. The chain kit puts this runtime code at that address: the same ABI,
/// witness type and checks as x402UptoPermit2Proxy of the x402 EVM package. The payer's signature binds the recipient
/// and the one facilitator that may settle; that facilitator picks the amount, up to the signed maximum.
contract X402UptoPermit2Proxy is ReentrancyGuardTransient {
    /// @notice Permit2's canonical address (a constant, so the runtime code can be placed anywhere).
    ISignatureTransfer public constant PERMIT2 = ISignatureTransfer(0x000000000022D473030F116dDEE9F6B43aC78BA3);

    /// @notice The witness part of the EIP-712 type the payer signs (Permit2 appends it to its own).
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)";

    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,address facilitator,uint256 validAfter)");

    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    event Settled();
    event SettledWithPermit();

    error AmountExceedsPermitted();
    error InvalidDestination();
    error InvalidOwner();
    error InvalidPermit2Address();
    error PaymentTooEarly();
    error Permit2612AmountMismatch();
    error UnauthorizedFacilitator();

    function settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _settle(permit, amount, owner, witness, signature);
        emit Settled();
    }

    /// @notice Approves Permit2 with the payer's EIP-2612 permit first; an approval already given also does.
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        if (permit2612.value != permit.permitted.amount) revert Permit2612AmountMismatch();
        try IERC20Permit(permit.permitted.token).permit(
            owner, address(PERMIT2), permit2612.value, permit2612.deadline, permit2612.v, permit2612.r, permit2612.s
        ) {} catch {}
        _settle(permit, amount, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();
        if (owner == address(0)) revert InvalidOwner();
        if (witness.to == address(0)) revert InvalidDestination();
        if (msg.sender != witness.facilitator) revert UnauthorizedFacilitator();
        if (block.timestamp < witness.validAfter) revert PaymentTooEarly();
        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter));
        PERMIT2.permitWitnessTransferFrom(
            permit,
            ISignatureTransfer.SignatureTransferDetails({to: witness.to, requestedAmount: amount}),
            owner,
            witnessHash,
            WITNESS_TYPE_STRING,
            signature
        );
    }
}
