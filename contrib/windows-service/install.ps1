<#
.SYNOPSIS
Installs gbrd, the gbr daemon, as a Windows service that runs as you.

.DESCRIPTION
Creates the service NAME (default "gbrd") whose command line is
"PATH\gbrd.exe" --service, running as your own account: gbrd's pipe
(\\.\pipe\gbr-USER), its state (%LOCALAPPDATA%\gbr\state), its config
(%APPDATA%\gbr\gbrd.conf) and the sandbox it keeps are all that account's,
so a service running as anyone else would serve nobody. Windows keeps the
password you give to log the service on; this script never writes it
anywhere else.

What it does, in order (README.md has the same steps as plain sc.exe and
reg.exe commands):
  1. grants the account "Log on as a service" (SeServiceLogonRight), which
     a service needs and sc.exe does not grant;
  2. creates the service, start type delayed automatic (or -StartType);
  3. sets recovery actions: restart after 5 s, again after 30 s, then
     nothing; the count starts over after a day without failure;
  4. registers the event log source "gbrd", whose messages are gbrd.exe's;
  5. starts it (unless -NoStart) and waits until it runs.

Run it from an elevated PowerShell ("Run as administrator"): creating a
service needs it. If you elevate with another account than your own, pass
-User with yours.

.PARAMETER GbrdPath
gbrd.exe to run. Default: gbrd.exe beside this script, else the one on PATH.

.PARAMETER Name
The service's name. Default: gbrd. A second user of the same machine
installs their own under another name (say gbrd-bob).

.PARAMETER User
The account the service runs as: "NAME" (local), "COMPUTER\NAME" or
"DOMAIN\NAME". Default: the account running this script.

.PARAMETER Credential
That account's credential; asked for when not given.

.PARAMETER StartType
DelayedAuto (the default): started a minute or two after boot, out of the
boot's way, and on its own after every reboot. Automatic: at boot, before
anyone logs on. Manual: only when started (Start-Service gbrd).

.PARAMETER Arguments
More options for gbrd's command line, such as '-l debug' or '-c C:\gbr\gbrd.conf'.

.PARAMETER NoStart
Create and configure the service, but do not start it.

.EXAMPLE
.\install.ps1
.EXAMPLE
.\install.ps1 -GbrdPath 'C:\Program Files\gbr\gbrd.exe' -StartType Manual -Arguments '-l debug'
#>
[CmdletBinding()]
param(
	[string]$GbrdPath,
	[string]$Name = 'gbrd',
	[string]$User,
	[pscredential]$Credential,
	[ValidateSet('DelayedAuto', 'Automatic', 'Manual')]
	[string]$StartType = 'DelayedAuto',
	[string]$Arguments = '',
	[switch]$NoStart
)

Set-StrictMode -Version 3
$ErrorActionPreference = 'Stop'

# Runs sc.exe; stops with its output when it fails.
function Invoke-Sc {
	$out = & sc.exe @args 2>&1
	if ($LASTEXITCODE -ne 0) {
		throw "sc.exe $($args -join ' ') failed ($LASTEXITCODE): $out"
	}
}

# "alice" and ".\alice" become "COMPUTER\alice": what NTAccount and the
# service manager both take.
function Resolve-Account([string]$Account) {
	if ($Account.StartsWith('.\')) {
		return "$env:COMPUTERNAME\$($Account.Substring(2))"
	}
	if (-not $Account.Contains('\') -and -not $Account.Contains('@')) {
		return "$env:COMPUTERNAME\$Account"
	}
	return $Account
}

# Grants an account a right (LsaAddAccountRights): services.msc does this
# when a service's account is set there; sc.exe and New-Service do not.
function Grant-Right([string]$Account, [string]$Right) {
	if (-not ('GbrSvcLsa' -as [type])) {
		Add-Type -TypeDefinition @'
using System;
using System.ComponentModel;
using System.Runtime.InteropServices;
using System.Security.Principal;

public static class GbrSvcLsa {
	[StructLayout(LayoutKind.Sequential)]
	struct LsaString {
		public ushort Length, MaximumLength;
		public IntPtr Buffer;
	}
	[StructLayout(LayoutKind.Sequential)]
	struct LsaAttributes {
		public int Length;
		public IntPtr RootDirectory, ObjectName;
		public uint Attributes;
		public IntPtr SecurityDescriptor, SecurityQualityOfService;
	}
	[DllImport("advapi32.dll")]
	static extern uint LsaOpenPolicy(IntPtr system, ref LsaAttributes attributes,
	    uint access, out IntPtr policy);
	[DllImport("advapi32.dll")]
	static extern uint LsaAddAccountRights(IntPtr policy, byte[] sid,
	    LsaString[] rights, uint count);
	[DllImport("advapi32.dll")]
	static extern uint LsaClose(IntPtr policy);
	[DllImport("advapi32.dll")]
	static extern int LsaNtStatusToWinError(uint status);

	const uint PolicyCreateAccount = 0x10, PolicyLookupNames = 0x800;

	public static void Grant(string account, string right) {
		SecurityIdentifier sid = (SecurityIdentifier)new NTAccount(account)
		    .Translate(typeof(SecurityIdentifier));
		byte[] bytes = new byte[sid.BinaryLength];
		sid.GetBinaryForm(bytes, 0);
		LsaAttributes attributes = new LsaAttributes();
		attributes.Length = Marshal.SizeOf(typeof(LsaAttributes));
		IntPtr policy;
		uint status = LsaOpenPolicy(IntPtr.Zero, ref attributes,
		    PolicyCreateAccount | PolicyLookupNames, out policy);
		if (status != 0)
			throw new Win32Exception(LsaNtStatusToWinError(status));
		LsaString[] rights = new LsaString[1];
		rights[0].Buffer = Marshal.StringToHGlobalUni(right);
		rights[0].Length = (ushort)(right.Length * 2);
		rights[0].MaximumLength = (ushort)(right.Length * 2 + 2);
		try {
			status = LsaAddAccountRights(policy, bytes, rights, 1);
			if (status != 0)
				throw new Win32Exception(LsaNtStatusToWinError(status));
		} finally {
			Marshal.FreeHGlobal(rights[0].Buffer);
			LsaClose(policy);
		}
	}
}
'@
	}
	[GbrSvcLsa]::Grant($Account, $Right)
}

$principal = [Security.Principal.WindowsPrincipal][Security.Principal.WindowsIdentity]::GetCurrent()
if (-not $principal.IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)) {
	throw 'Run this from an elevated PowerShell ("Run as administrator"): creating a service needs it.'
}

if (-not $GbrdPath) {
	$beside = Join-Path $PSScriptRoot 'gbrd.exe'
	if (Test-Path -LiteralPath $beside) {
		$GbrdPath = $beside
	} elseif ($cmd = Get-Command gbrd.exe -ErrorAction SilentlyContinue) {
		$GbrdPath = $cmd.Source
	} else {
		throw 'gbrd.exe is neither beside this script nor on PATH: give -GbrdPath.'
	}
}
$GbrdPath = (Resolve-Path -LiteralPath $GbrdPath).ProviderPath

if (Get-Service -Name $Name -ErrorAction SilentlyContinue) {
	throw "A service named '$Name' exists already: run uninstall.ps1 -Name $Name first, or choose another -Name."
}

if (-not $User) {
	$User = [Security.Principal.WindowsIdentity]::GetCurrent().Name
}
$account = Resolve-Account $User
if (-not $Credential) {
	$Credential = Get-Credential -UserName $account -Message "The password of $account, which the service '$Name' runs as (Windows keeps it to log the service on)"
}
if (-not $Credential) {
	throw 'No credential given.'
}
$account = Resolve-Account $Credential.UserName
$short = $account.Substring($account.IndexOf('\') + 1)

# A gbrd started by gbr or gbrctl holds the pipe: the service could not
# take it, and its start would fail (its log would say so).
$pipe = "gbr-$short"
if (Get-ChildItem -Path '\\.\pipe\' -ErrorAction SilentlyContinue | Where-Object { $_.Name -ieq $pipe }) {
	Write-Warning "A gbrd already serves \\.\pipe\$pipe. Stop it first (gbrctl shutdown), or the service's start will fail."
}

Write-Host "Granting $account the right to log on as a service"
Grant-Right $account 'SeServiceLogonRight'

$binary = "`"$GbrdPath`" --service"
if ($Arguments) {
	$binary += " $Arguments"
}
Write-Host "Creating the service '$Name': $binary"
# New-Service hands the password to the service manager directly; sc.exe
# would put it on a command line that other programs can read.
New-Service -Name $Name -BinaryPathName $binary `
	-DisplayName "gbr daemon ($short)" `
	-Description "gbrd, the gbr coding agent's daemon: sessions, sandbox and disk log of $account. See gbrd(8) and contrib\windows-service\README.md." `
	-StartupType Manual -Credential $Credential | Out-Null

# Start types New-Service cannot set in Windows PowerShell 5.1.
switch ($StartType) {
	'DelayedAuto' { Invoke-Sc config $Name start= delayed-auto }
	'Automatic' { Invoke-Sc config $Name start= auto }
}
# Restarts after a crash: 5 s, then 30 s, then no more; a day without one
# starts the count over. A start that fails cleanly (a broken config, the
# pipe taken) is not retried: it needs a person, and the event log says why.
Invoke-Sc failure $Name reset= 86400 actions= restart/5000/restart/30000//

# The event log source: gbrd.exe holds the messages (gbrd-msg.mc).
$source = 'HKLM:\SYSTEM\CurrentControlSet\Services\EventLog\Application\gbrd'
if (-not (Test-Path $source)) {
	New-Item -Path $source | Out-Null
}
New-ItemProperty -Path $source -Name EventMessageFile -PropertyType ExpandString -Value $GbrdPath -Force | Out-Null
New-ItemProperty -Path $source -Name TypesSupported -PropertyType DWord -Value 7 -Force | Out-Null

if ($NoStart) {
	Write-Host "Installed. Start it with: Start-Service $Name"
	exit 0
}

Write-Host "Starting '$Name'"
try {
	Start-Service -Name $Name
	(Get-Service -Name $Name).WaitForStatus('Running', [TimeSpan]::FromMinutes(2))
} catch {
	$state = (& sc.exe query $Name) -join "`n"
	Write-Warning "The service did not start: $($_.Exception.Message)"
	Write-Warning $state
	Write-Warning "Its log: gbr\state\gbrd.log in the %LOCALAPPDATA% of $account. The event log: Get-WinEvent -ProviderName gbrd -MaxEvents 10. Error 1069 is a wrong password or a missing right to log on as a service."
	exit 1
}
Write-Host "'$Name' is running."
# gbrctl talks to the pipe of whoever runs it: only the service's account.
$gbrctl = Join-Path (Split-Path -Parent $GbrdPath) 'gbrctl.exe'
$me = Resolve-Account ([Security.Principal.WindowsIdentity]::GetCurrent().Name)
if ((Test-Path -LiteralPath $gbrctl) -and $me -ieq $account) {
	& $gbrctl status
}
