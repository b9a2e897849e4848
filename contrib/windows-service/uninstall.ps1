<#
.SYNOPSIS
Stops and removes the gbrd service that install.ps1 made.

.DESCRIPTION
Stops the service NAME (default "gbrd") if it runs, waiting for gbrd to
close its disk log, then deletes it. The event log source "gbrd" goes too,
unless another service still runs gbrd.exe --service (it is shared).

What stays, on purpose: the state (the disk log, gbrd.log) in
%LOCALAPPDATA%\gbr\state and the config in %APPDATA%\gbr of the service's
account, which are that user's and which a gbrd started by gbr or gbrctl
goes on using; and the account's right to log on as a service, which other
services may need (remove it in secpol.msc, Local Policies, User Rights
Assignment, "Log on as a service").

Run it from an elevated PowerShell ("Run as administrator").

.PARAMETER Name
The service's name. Default: gbrd.

.EXAMPLE
.\uninstall.ps1
#>
[CmdletBinding()]
param(
	[string]$Name = 'gbrd'
)

Set-StrictMode -Version 3
$ErrorActionPreference = 'Stop'

$principal = [Security.Principal.WindowsPrincipal][Security.Principal.WindowsIdentity]::GetCurrent()
if (-not $principal.IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)) {
	throw 'Run this from an elevated PowerShell ("Run as administrator"): deleting a service needs it.'
}

$service = Get-Service -Name $Name -ErrorAction SilentlyContinue
if (-not $service) {
	Write-Host "No service named '$Name'."
} else {
	if ($service.Status -ne 'Stopped') {
		Write-Host "Stopping '$Name'"
		# gbrd closes its disk log before it reports STOPPED.
		Stop-Service -Name $Name
		$service.WaitForStatus('Stopped', [TimeSpan]::FromMinutes(1))
	}
	Write-Host "Deleting '$Name'"
	# Remove-Service is PowerShell 6 and later; sc.exe is everywhere.
	$out = & sc.exe delete $Name 2>&1
	if ($LASTEXITCODE -ne 0) {
		throw "sc.exe delete $Name failed ($LASTEXITCODE): $out"
	}
}

# The event source is shared by every gbrd service: only the last one's
# removal takes it.
$others = @(Get-CimInstance -ClassName Win32_Service |
	Where-Object { $_.Name -ne $Name -and $_.PathName -match 'gbrd(\.exe)?"?\s+--service' })
$source = 'HKLM:\SYSTEM\CurrentControlSet\Services\EventLog\Application\gbrd'
if ($others.Count -eq 0 -and (Test-Path $source)) {
	Remove-Item -Path $source
	Write-Host 'Removed the event log source gbrd.'
} elseif ($others.Count -gt 0) {
	Write-Host "Kept the event log source gbrd: $($others.Name -join ', ') still use it."
}
Write-Host 'Done. The state and the config of its account are kept (see Get-Help .\uninstall.ps1).'
